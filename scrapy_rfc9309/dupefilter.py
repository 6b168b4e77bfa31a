"""``DUPEFILTER_CLASS = "scrapy_rfc9309.dupefilter.RedisDupeFilter"``: scrapy-redis's
dupefilter for a fleet whose Redis may be away for a while.

scrapy-redis's ``RFPDupeFilter`` checks each new request with a call to Redis; while
Redis cannot be reached, or refuses writes (out of memory, a read-only replica),
that call raises, and scrapy-redis's scheduler loses the request (a traceback in the
log).  This one lets such a request through as new: nothing is lost, and the shared
queue (or the process itself, while Redis is away) takes it.  Its fingerprint is
remembered here, so a second request for it is a duplicate, and added to the fleet's
set with the first check that reaches Redis again, or when the crawl closes.  The
price: while Redis is away, a page another process saw may be fetched once more by
this one (still spaced by its Crawl-delay).  Meanwhile Redis is asked again at most
every :data:`RETRY` seconds, as the fleet's other calls are: each check is a
blocking call (scrapy-redis's interface), and against a Redis that drops packets one
blocks the reactor for scrapy-redis's socket timeout.
"""

from __future__ import annotations

import asyncio
import logging
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy_redis.dupefilter import RFPDupeFilter

from ._redis import redis_errors
from .fleet.health import RETRY_AFTER

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from typing_extensions import Self

__all__ = ["RedisDupeFilter"]

logger = logging.getLogger(__name__)

#: While Redis cannot be reached, it is asked again at most this often (seconds): as
#: the fleet's other calls, after the same pause.
RETRY = RETRY_AFTER
#: Redis cannot check a request (see :func:`redis_errors`).  Raised, the error
#: would be lost with the request, and end one of Scrapy's tasks for the page's
#: output (see the add-on's start-up WARNING on scrapy-redis's).
REDIS_AWAY = redis_errors()


class RedisDupeFilter(RFPDupeFilter):  # type: ignore[misc]
    def __init__(self, server: Any, key: str, debug: bool = False) -> None:
        super().__init__(server, key, debug)
        self.stats: Any = None
        #: Fingerprints of the requests let through while Redis was away, not in
        #: the fleet's set yet.
        self._unsent: set[str] = set()
        self._retry_at = 0.0

    @classmethod
    def from_spider(cls, spider: Spider) -> Self:
        dupefilter = super().from_spider(spider)
        dupefilter.stats = spider.crawler.stats
        spider.crawler.signals.connect(dupefilter.send_unsent, signal=signals.spider_closed)
        return dupefilter  # type: ignore[no-any-return]

    async def send_unsent(self) -> None:
        """The crawl closes: add the fingerprints let through while Redis was away to
        the fleet's set, if Redis takes them now, so that the other processes do not
        fetch those pages again.  On a thread: the reactor never waits on it (the
        close does, for redis-py's socket timeout at most)."""
        if not self._unsent:
            return
        try:
            await asyncio.to_thread(self.server.sadd, self.key, *self._unsent)
        except REDIS_AWAY as exc:
            logger.warning(
                "The dupefilter closes with %d request(s) let through while Redis was "
                "away and not in its set (%s): other processes may fetch them again",
                len(self._unsent),
                exc,
            )
            return
        self._unsent.clear()

    def request_seen(self, request: Request) -> bool:
        fingerprint = self.request_fingerprint(request)
        if fingerprint in self._unsent:
            return True
        if monotonic() < self._retry_at:
            return self._unchecked(fingerprint)
        try:
            with self.server.pipeline(transaction=False) as pipe:
                if self._unsent:
                    pipe.sadd(self.key, *self._unsent)
                pipe.sadd(self.key, fingerprint)
                added = pipe.execute()[-1]
        except REDIS_AWAY as exc:
            if not self._unsent:
                logger.warning(
                    "The dupefilter cannot use Redis (%s): until it can, requests it "
                    "cannot check go through as new",
                    exc,
                )
            self._retry_at = monotonic() + RETRY
            return self._unchecked(fingerprint)
        if self._unsent:
            logger.warning(
                "The dupefilter uses Redis again: the %d request(s) let through "
                "meanwhile are in its set",
                len(self._unsent),
            )
            self._unsent.clear()
        return bool(added == 0)

    def _unchecked(self, fingerprint: str) -> bool:
        self._unsent.add(fingerprint)
        if self.stats is not None:
            self.stats.inc_value("fleet/dupefilter_unchecked")
        return False
