"""Questions across jobs: tables of probes, runs, curves and trends, comparisons, raw SQL."""
