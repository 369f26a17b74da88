"""The committed lock (requirements.lock) pins what pyproject.toml asks for, so that `make`
installs a set no resolver has to search. `make lock` refreshes it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def locked_versions() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        spec = line.split(";")[0].strip()
        if spec and not spec.startswith("#"):
            name, _, version = spec.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def declared_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared.extend(extra)
    return [Requirement(text) for text in declared]


def test_every_declared_requirement_is_pinned_at_a_version_it_admits() -> None:
    pins = locked_versions()
    disagreements = [
        f"{requirement} (locked: {pins.get(canonicalize_name(requirement.name), 'missing')})"
        for requirement in declared_requirements()
        if canonicalize_name(requirement.name) not in pins
        or not requirement.specifier.contains(
            pins[canonicalize_name(requirement.name)], prereleases=True
        )
    ]
    assert disagreements == [], "pyproject.toml and requirements.lock disagree; run `make lock`"
