"""tracker: a database-backed results tracker for ML reproduction studies."""

__version__ = "0.1.0"
