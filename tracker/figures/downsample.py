"""Shape-preserving downsampling, for drawing: kept in ``tracker.summary.downsample`` (the
kept summary downsamples its trajectories), named here for the figures and the server."""

from tracker.summary.downsample import (
    DEFAULT_MAX_POINTS,
    POINTS_PER_BUCKET,
    downsample,
    minmax_indices,
)

__all__ = ["DEFAULT_MAX_POINTS", "POINTS_PER_BUCKET", "downsample", "minmax_indices"]
