"""The fleet's Redis as one crawler sees it, shared by the components that use it
(the robots middleware, the Crawl-delay throttle, and the shared queue when it is on
the same Redis): one WARNING when it fails, one when it answers again, whichever
component noticed, and a pause before it is called again after a failure, so that a
Redis that is down costs each request nothing."""

from __future__ import annotations

import logging
import weakref
from time import monotonic
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: After a failure, the fleet's Redis is left alone for this long (seconds).
RETRY_AFTER = 5.0


class FleetHealth:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self._down_until = 0.0
        self._failed_at = float("-inf")
        self._down = False
        self._queue = False

    def share_queue(self) -> None:
        """The shared queue is on the fleet's Redis too: its absence and return are
        said in the same lines."""
        self._queue = True

    def usable(self) -> bool:
        """False for :data:`RETRY_AFTER` seconds after a failure."""
        return monotonic() >= self._down_until

    def failed(self, exc: Exception, stat: str) -> None:
        self._failed_at = monotonic()
        self._down_until = self._failed_at + RETRY_AFTER
        self.stats.inc_value(stat)
        if not self._down:
            self._down = True
            alone = (
                "spaces its requests, fetches robots.txt and crawls the requests it "
                "schedules (taking none from the shared queue)"
                if self._queue
                else "spaces its requests and fetches robots.txt"
            )
            logger.warning(
                "Fleet Redis unreachable (%s): this process %s by itself until it answers again",
                exc,
                alone,
            )

    def answered(self, asked_at: float) -> None:
        """A call asked at *asked_at* (:func:`time.monotonic`) was answered.  One
        asked before the last failure says nothing of Redis since: its answer may
        be read after another call found Redis gone."""
        if self._down and asked_at > self._failed_at:
            self._down = False
            shared = (
                "spacing, robots.txt and the queue are"
                if self._queue
                else ("spacing and robots.txt are")
            )
            logger.warning("Fleet Redis answers again: %s shared again", shared)


_HEALTH: weakref.WeakKeyDictionary[Crawler, FleetHealth] = weakref.WeakKeyDictionary()


def fleet_health(crawler: Crawler) -> FleetHealth:
    """The one :class:`FleetHealth` of *crawler*."""
    health = _HEALTH.get(crawler)
    if health is None:
        health = _HEALTH[crawler] = FleetHealth(crawler)
    return health
