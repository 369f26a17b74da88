"""tracker: a database-backed results tracker for the FlashOptim reproduction study."""

__version__ = "0.1.0"
