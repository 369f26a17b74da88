"""The report's figures: pure functions from a job's data to plotly figures, no file I/O.

Every text that comes from the database is passed through ``style.plot_text`` before it
becomes a trace name, tick label or annotation, so plotly shows it literally.
"""

from tracker.figures.memory import memory_scaling
from tracker.figures.table4 import table4

__all__ = ["memory_scaling", "table4"]
