"""How a page keeps what it works out across jobs for other pages of the same jobs: the
server keeps the claims and the gate's kept verdicts its home page works out for its claims
and comparison pages (``tracker.server.page_cache``); the report keeps nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import polars as pl

    from tracker.queries.selection import JobSelection
    from tracker.queries.yardsticks import KeptVerdicts


class Keeping(Protocol):
    def claims(self, selection: JobSelection, judge: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        """The claims of ``selection``'s jobs: kept ones, else ``judge``'s."""
        ...

    def kept_verdicts(self, study: str, read: Callable[[], KeptVerdicts]) -> KeptVerdicts:
        """The kept verdicts of ``study``'s jobs (the gate's yardstick): kept ones, else
        ``read``'s."""
        ...


class KeptNowhere:
    """Everything worked out when asked (the report's)."""

    def claims(self, selection: JobSelection, judge: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        return judge()

    def kept_verdicts(self, study: str, read: Callable[[], KeptVerdicts]) -> KeptVerdicts:
        return read()


NOWHERE = KeptNowhere()
