"""The database layer: engines and migrations, ingest, bulk points, catalog reads."""
