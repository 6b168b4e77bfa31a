"""Having Scrapy's engine ask its scheduler for a request again, at a chosen time.

The engine asks when a request ends, when one is scheduled, and at its heartbeat
(every few seconds).  A queue shared by a fleet's processes may have a unit become
ready, or another process push one, while nothing of this process ends: it needs the
engine to ask sooner.  Scrapy has no call for just that, but ``engine.crawl(request)``
schedules a request and has the engine look at its scheduler, and a
``request_scheduled`` handler that raises ``IgnoreRequest`` drops the request before
it reaches the scheduler (documented since Scrapy 2.11.2).  So the waker crawls a
request of its own and drops it there: nothing is queued, downloaded or logged; the
engine looks.  Counted in ``crawldelay/engine_wakes``.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.asyncio import CallLaterResult, call_later

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Request.meta key of the waker's own requests.
META_WAKE = "crawldelay_wake"


#: By default, a wake comes up to this much later than asked, at random (seconds), so
#: that a fleet's processes, woken for the same moment, do not all ask Redis at once.
JITTER = 0.1


class EngineWaker:
    """One pending wake at most: the earliest asked for."""

    def __init__(self, crawler: Crawler, jitter: float = JITTER) -> None:
        self.crawler = crawler
        self.jitter = jitter
        self._pending: CallLaterResult | None = None
        self._due = 0.0
        crawler.signals.connect(self._drop_own, signal=signals.request_scheduled)

    def wake_in(self, seconds: float) -> None:
        seconds = max(seconds, 0.01)
        due = time.monotonic() + seconds
        if self._pending is not None:
            if self._due <= due:
                return
            self._pending.cancel()
        self._due = due
        self._pending = call_later(seconds + random.uniform(0.0, self.jitter), self._wake)

    def _wake(self) -> None:
        self._pending = None
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy 2.19: no engine yet (the crawl never started)
            return
        if engine is None or not engine.running or engine.spider is None:
            return
        self.crawler.stats.inc_value("crawldelay/engine_wakes")
        request = Request("data:,", callback=NO_CALLBACK, dont_filter=True, meta={META_WAKE: True})
        try:
            engine.crawl(request)
        except Exception as exc:  # the crawl is closing
            logger.debug("Waking the engine failed: %s", exc)

    def _drop_own(self, request: Request, spider: Any = None) -> None:
        if request.meta.get(META_WAKE):
            raise IgnoreRequest
