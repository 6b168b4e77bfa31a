"""The fleet's Redis as one crawler sees it, shared by the components that use it
(the robots middleware, the Crawl-delay throttle, and the shared queue when it is on
the same Redis): one WARNING when it fails, one when it answers again, whichever
component noticed, and a pause before it is called again after a failure, so that a
Redis that is down costs each request nothing.  What a failed call may have left in
Redis (a unit held for a request that ended, a robots.txt lock) is owed to it
(:meth:`FleetHealth.owe`): undone as soon as Redis answers again, not left to
expire while the other processes wait for it."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import TYPE_CHECKING

from . import FleetRedisError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: After a failure, the fleet's Redis is left alone for this long (seconds).
RETRY_AFTER = 5.0
#: What is owed to the fleet's Redis is sent at most this often (seconds), and once
#: the pause after a failure is over.
OWED_EVERY = 0.1


class FleetHealth:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self._down_until = 0.0
        self._failed_at = float("-inf")
        self._down = False
        self._queue = False
        #: What is owed to Redis: each task, with the call it sends.
        self._owed: dict[asyncio.Future[None], Callable[[], Awaitable[object]]] = {}
        self._closed = False

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

    def owe(self, send: Callable[[], Awaitable[object]], life: float, stat: str) -> None:
        """*send* undoes what a call that failed may have left in Redis: it is sent
        whenever Redis may be called, until Redis answers it (a failure counted as
        one, in *stat*), for *life* seconds at most (what it undoes has expired by
        then), or until the crawl closes."""
        if self._closed:  # the leases and locks' lives end it
            return
        task = asyncio.ensure_future(self._pay(send, monotonic() + life, stat))
        self._owed[task] = send
        task.add_done_callback(self._owed.pop)

    async def _pay(self, send: Callable[[], Awaitable[object]], until: float, stat: str) -> None:
        while monotonic() < until:
            # Asleep through the pause after a failure, not polling it.
            await asyncio.sleep(max(OWED_EVERY, self._down_until - monotonic()))
            if not self.usable() or monotonic() >= until:
                continue
            asked = monotonic()
            try:
                await send()
            except FleetRedisError as exc:
                self.failed(exc, stat)
            else:
                self.answered(asked)
                return

    async def close(self) -> None:
        """The crawl closes: what is still owed is sent once more, if Redis may be
        called (else the leases and locks' lives end it)."""
        self._closed = True
        owed = list(self._owed.values())
        for task in list(self._owed):
            task.cancel()
        if owed and self.usable():
            await asyncio.gather(*(send() for send in owed), return_exceptions=True)


_HEALTH: weakref.WeakKeyDictionary[Crawler, FleetHealth] = weakref.WeakKeyDictionary()


def fleet_health(crawler: Crawler) -> FleetHealth:
    """The one :class:`FleetHealth` of *crawler*."""
    health = _HEALTH.get(crawler)
    if health is None:
        health = _HEALTH[crawler] = FleetHealth(crawler)
    return health
