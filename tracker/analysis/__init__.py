"""The study's analysis: pure functions over polars frames, no database, no I/O."""
