"""``tracker serve``: the tracker live in a browser, read-only (FastAPI on uvicorn).

Pages and their JSON twins under ``/api/`` reuse the queries of ``tracker.queries`` and
``tracker.store.catalog``; work is cached by the content and metadata of the jobs it is
made from (``cache``).
"""

from tracker.server.app import create_app

__all__ = ["create_app"]
