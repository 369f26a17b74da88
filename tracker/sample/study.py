"""The studies' ``[sample]`` tables, as the generator reads them."""

from __future__ import annotations

from functools import cache

from tracker.analysis.expectations import study_expectations, study_names
from tracker.analysis.sample_spec import SampleSpec, SampleVariant
from tracker.errors import NoSampleJobs, known_names


def sample_studies() -> list[str]:
    """The studies that have sample jobs, in ``tracker studies``' order."""
    return [name for name in study_names() if study_expectations(name).sample is not None]


def sample_study(study: str) -> SampleSpec:
    """The sample jobs' parameters of ``study``; ``NoSampleJobs`` when it has none."""
    sample = study_expectations(study).sample
    if sample is None:
        raise NoSampleJobs(study=study, known=known_names(sample_studies()))
    return sample


def sample_variants() -> dict[str, SampleVariant]:
    """Every study's sample variants (a sample arm of any of them can be written); of a name
    two studies give, the first study's."""
    return _variants(tuple(sample_studies()))


@cache
def _variants(studies: tuple[str, ...]) -> dict[str, SampleVariant]:
    variants: dict[str, SampleVariant] = {}
    for name in studies:
        for variant, spec in sample_study(name).variants.items():
            variants.setdefault(variant, spec)
    return variants
