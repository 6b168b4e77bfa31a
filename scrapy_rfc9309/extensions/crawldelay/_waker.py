"""Having Scrapy's engine ask its scheduler for a request again, at a chosen time.

The engine asks when a request ends, when one is scheduled, and at its heartbeat
(every few seconds).  A queue shared by a fleet's processes may have a unit become
ready, or another process push one, while nothing of this process ends: it needs the
engine to ask sooner.  Scrapy has no public call for that, but every download it
makes ends with the engine asking its scheduler, so the waker downloads a ``data:``
URL through the engine's public ``download_async``: no network, no site, one request
in Scrapy's downloader stats, counted in ``crawldelay/engine_wakes``.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.asyncio import CallLaterResult, call_later
from scrapy.utils.defer import deferred_from_coro

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Request.meta key of the waker's own requests.
META_WAKE = "crawldelay_wake"


#: A wake comes up to this much later than asked, at random (seconds), so that a
#: fleet's processes, woken for the same moment, do not all ask Redis at once.
JITTER = 0.1


class EngineWaker:
    """One pending wake at most: the earliest asked for."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._pending: CallLaterResult | None = None
        self._due = 0.0

    def wake_in(self, seconds: float) -> None:
        seconds = max(seconds, 0.01)
        due = time.monotonic() + seconds
        if self._pending is not None:
            if self._due <= due:
                return
            self._pending.cancel()
        self._due = due
        self._pending = call_later(seconds + random.uniform(0.0, JITTER), self._wake)

    def _wake(self) -> None:
        self._pending = None
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy 2.19: no engine yet (the crawl never started)
            return
        if engine is None or not engine.running:
            return
        self.crawler.stats.inc_value("crawldelay/engine_wakes")
        request = Request("data:,", callback=NO_CALLBACK, dont_filter=True, meta={META_WAKE: True})
        deferred_from_coro(engine.download_async(request)).addErrback(
            lambda failure: logger.debug("Waking the engine failed: %s", failure.value)
        )
