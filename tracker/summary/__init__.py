"""A job's kept summary: what its pages draw that takes every curve point to make.

Built once from a job's data at ingest (``tracker.summary.build.summarize``), stored as one
compressed JSON document (``tracker.summary.model``; a short job's drawn lines are made from
its points when a page asks), read back by the pages. A pure layer: below
``tracker.figures`` (which draws these numbers), importing no figures and no database code.

- ``arrays``: arrays kept in JSON (base64), and the late-steps zoom of drawn curves
- ``downsample``: shape-preserving downsampling of long curves, for drawing
- ``grid``: one arm's smoothed loss on a grid, for the figures across jobs
- ``trajectories``: the numbers the trajectories figure draws
- ``model``: the summary and its codec; ``version``: what stored rows were judged against
- ``build``: the summary, verdicts and numbers of a job, from its data
"""
