"""Claims: the study's verdicts judged on every job's evidence together (docs/claims.md).

``judge``: the registry of claim kinds and ``judge_claims``; ``specs``: each kind's
parameters (what a study file's ``[[claims]]`` picks, light enough for every command that
reads a study file: no polars or numpy); ``rules``, ``compare``, ``threshold`` and
``stochastic``: the kinds' judge functions; ``within_jobs`` (the comparing claims' rule with
jobs as strata), ``lengths`` (which runs they compare) and ``next_runs`` (what would decide).
"""
