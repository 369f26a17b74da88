"""A study file's ``[sample]`` table: what the demo's sample jobs of the study hold and the
numbers the generator (``tracker.sample``) shapes their files by. A study without one has
no demo."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tracker.analysis.fields import Number, String

Triple = tuple[float, float, float]  # params, optimizer state, grads


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SampleVariant(_Table):
    """How a variant's sample arms and probes look."""

    step_ms: Number  # mean milliseconds per training step
    val_loss: Number | None = None  # mean final validation loss; none for a diverging variant
    deviation: Triple = (0.0, 0.0, 0.0)  # from the baseline's curve: end bias, wiggle, white
    diverges: bool = False  # the loss blows up, then inf, then nan
    # a probed variant's analytic bytes/param, fixed overheads (MiB), a proportional state
    # overhead (B/param: group padding) and the optimizer step's transient buffers (B/param)
    bpp: Triple | None = None
    overhead_mib: Triple = (0.75, 1.5, 0.75)
    overhead_bpp: Number = 0.0
    step_temp_bpp: Number = 4.0


class SampleSpec(_Table):
    """The demo's six jobs: ``arms`` (job1, job2; job3 the first three), ``seed_arms``
    (job4 to job6), probed ``probes`` (no ``mem_sweep.json`` when empty)."""

    arms: tuple[str, ...] = Field(min_length=1)
    seed_arms: tuple[str, ...] = Field(min_length=1)
    probes: tuple[str, ...] = ()
    failed_probe: tuple[str, str] | None = None  # (model, variant): job1's out-of-memory record
    state_shift: Number = (
        0.0  # job3's ``flash`` state B/param regression (its library's next version)
    )
    library: String  # the metadata key of the optimizer library's version
    version: String  # its value in every demo job
    regressed_version: String | None = None  # job3's, when it differs
    job_prefix: str = ""  # before "job1" .. "job6": the demo's job names
    meta: dict[str, str] = {}  # more metadata of every demo job
    variants: dict[str, SampleVariant]
