"""The offline HTML report of ingested jobs (see ``writer`` for the layout, ``pages`` for
the pure page-rendering functions a server can call)."""

from tracker.report.writer import JobReport, Report, generate_report, write_report

__all__ = ["JobReport", "Report", "generate_report", "write_report"]
