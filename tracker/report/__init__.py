"""The offline HTML report of ingested jobs: writes the pages of ``tracker.views`` to files
(see ``writer`` for the layout)."""

from tracker.report.writer import JobReport, Report, generate_report

__all__ = ["JobReport", "Report", "generate_report"]
