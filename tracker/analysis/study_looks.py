"""How pages name the studies and draw their variants: the heading of a page of several
studies' jobs, and each variant's and arm's label and colour.

A variant is its name across studies (the first study's look of a name is drawn). Colours
are distinct across the studies known here (packaged, ``--studies``, ``TRACKER_STUDIES``
and those read from a database, ``judged_stored``): studies are taken in a fixed order (the
default first, the others by name, the databases' after them) and a colour an earlier study
took is given to the later one's variant as the first spare colour instead; the variants a
study names but does not style (its ``[sample]`` and ``[memory]`` ones) get spare colours
too, so every database's figures draw two variants alike in no case.
"""

from __future__ import annotations

import colorsys
from functools import cache

from tracker.analysis.expectations import (
    DEFAULT_STUDY,
    Expectations,
    Look,
    Style,
    judged_stored,
    study_expectations,
    study_names,
)

# Colours for variants no study styles, taken in this order (each one not taken already).
FALLBACK_COLORS: tuple[str, ...] = (
    "#7b4fc9", "#00a3b4", "#b3591f", "#5c6f82", "#c23b8f", "#6b8e23", "#3d4fb8", "#a88b00",
)  # fmt: skip
SPARE_COLORS = 24  # spare colours made: the fallback ones, then hues of their own


def study_heading(studies: dict[str, Expectations]) -> str:
    """What a page of the jobs of these studies (name -> what judges its jobs) is headed
    by: their titles (a study not judged here by its name), the default study's when there
    are none."""
    titles = []
    for name, exp in studies.items() or {DEFAULT_STUDY: study_expectations()}.items():
        titles.append(name if exp.study is None else exp.study.title)
    if len(titles) == 1:
        return f"{titles[0]} reproduction"
    return f"{', '.join(titles[:-1])} and {titles[-1]} reproductions"


def study_styles() -> Style:
    """Every study's looks, colours distinct across studies (a figure across jobs may draw
    several studies' variants)."""
    return _styles(tuple((name, _known(name).source) for name in _known_names()))[0]


def spare_colors() -> tuple[str, ...]:
    """Colours no study's look has, in the order a figure gives them to unstyled variants."""
    return _styles(tuple((name, _known(name).source) for name in _known_names()))[1]


def _known_names() -> list[str]:
    on_disk = study_names()
    return on_disk + sorted(name for name in judged_stored() if name not in on_disk)


def _known(name: str) -> Expectations:
    return study_expectations(name) if name in study_names() else judged_stored()[name]


def _spares(taken: set[str]) -> list[str]:
    """``SPARE_COLORS`` colours not ``taken``: the fallback ones, then evenly spread hues."""
    made = [color for color in FALLBACK_COLORS if color not in taken]
    step = 0
    while len(made) < SPARE_COLORS:
        red, green, blue = colorsys.hls_to_rgb((step * 0.618034) % 1.0, 0.42, 0.6)
        color = f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"
        if color not in taken and color not in made:
            made.append(color)
        step += 1
    return made


@cache
def _styles(studies: tuple[tuple[str, str], ...]) -> tuple[Style, tuple[str, ...]]:
    looks: dict[str, dict[str, Look]] = {"variants": {}, "arms": {}}
    taken: set[str] = set()
    for name, _source in studies:
        exp = _known(name)
        style = exp.style or Style(variants={}, arms={})
        named = [*(exp.sample.variants if exp.sample else ()), *exp.memory.expected_bpp]
        unstyled = {v: Look(label=v, color="#000000") for v in named if v not in style.variants}
        drawn: dict[str, str] = {}  # a colour of this study's -> the one it is drawn in
        for kind, own in (("variants", style.variants | unstyled), ("arms", style.arms)):
            for key, look in own.items():
                if key in looks[kind]:
                    continue
                declared = look.color if key not in unstyled else f"unstyled {key}"
                if declared not in drawn:
                    free = look.color not in taken and declared == look.color
                    drawn[declared] = look.color if free else _spares(taken)[0]
                    taken.add(drawn[declared])
                looks[kind][key] = look.model_copy(update={"color": drawn[declared]})
    style = Style(variants=looks["variants"], arms=looks["arms"])
    return style, tuple(_spares(taken))
