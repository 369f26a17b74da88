"""Work above the store: ingesting and copying jobs (rows, then their derived rows) and
refilling derived rows. The CLI, the demo and the Python API call these."""
