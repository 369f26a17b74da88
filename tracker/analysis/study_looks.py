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
from tracker.analysis.study_files import study_files

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
    return _styles(_known())[0]


def spare_colors() -> tuple[str, ...]:
    """Colours no study's look has, in the order a figure gives them to unstyled variants."""
    return _styles(_known())[1]


def _known() -> tuple[tuple[str, str], ...]:
    """Each study known, in order, with where its definition is: its file, else the digest
    of a database's stored text."""
    files, stored = study_files(), judged_stored()
    on_disk = tuple((name, files[name].source) for name in study_names())
    return on_disk + tuple((name, stored[name].digest) for name in sorted(stored.keys() - files))


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
    for name, where in studies:
        stored = judged_stored().get(name)
        exp = stored if stored is not None and stored.digest == where else study_expectations(name)
        style = exp.style or Style(variants={}, arms={})
        drawn: dict[str, str] = {}  # a colour of this study's -> the one it is drawn in
        for kind, own in (("variants", style.variants), ("arms", style.arms)):
            for key, look in own.items():
                if key in looks[kind]:  # an earlier study's: its colour stands for this one
                    drawn.setdefault(look.color, looks[kind][key].color)
                    continue
                if look.color not in drawn:
                    drawn[look.color] = _spares(taken)[0] if look.color in taken else look.color
                    taken.add(drawn[look.color])
                looks[kind][key] = look.model_copy(update={"color": drawn[look.color]})
        for variant in [*(exp.sample.variants if exp.sample else ()), *exp.memory.expected_bpp]:
            if variant not in looks["variants"]:  # named, not styled
                looks["variants"][variant] = Look(label=variant, color=_spares(taken)[0])
                taken.add(looks["variants"][variant].color)
    style = Style(variants=looks["variants"], arms=looks["arms"])
    return style, tuple(_spares(taken))
