"""robots.txt kept across restarts, for the robots middleware (``RFC9309_PERSISTENT_CACHE``).

:class:`PersistentRobotsFetcher` is a :class:`~._fetch.Fetcher` around another one:
it first reads the stored result of the authority (see :mod:`scrapy_rfc9309.robots._stored`): a
fresh one is used without a request; an expired good copy is refreshed with a
conditional request (a 304 renews it, body unchanged) and is the last good copy
while the site is unreachable.  What a fetch gives is stored again, except an
unreachable result (the last good copy stays).  If the store fails, the crawl goes
on fetching, and says so once.
"""

from __future__ import annotations

import logging
from time import monotonic
from time import time as wall_clock
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import Request, signals
from scrapy.http.request import NO_CALLBACK

from ...robots import FetchOutcome, RobotsEntry, StoredRobots, StoreError
from ._fetch import Fetched, Fetcher, Revalidation, entry_for, own_robots_of, parse_body

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ..._settings import RobotsSettings


logger = logging.getLogger(__name__)


class RobotsStore(Protocol):
    replaced: str | None

    async def open(self) -> None: ...

    async def get(self, authority: str) -> StoredRobots | None: ...

    async def put(self, authority: str, record: StoredRobots) -> None: ...

    async def close(self) -> None: ...


class PersistentRobotsFetcher:
    def __init__(self, crawler: Crawler, fetcher: Fetcher, store: RobotsStore, where: str) -> None:
        self.fetcher = fetcher
        self.config = fetcher.config
        self.store = store
        self.where = where
        self.stats = crawler.stats
        self._failed = False
        self._replaced_said = False
        #: When this crawl started (seconds since the epoch): a kept copy fetched
        #: since came from this run (another process of a fleet), not an earlier crawl.
        self.started = wall_clock()
        crawler.signals.connect(self._open, signal=signals.spider_opened)

    async def _open(self, spider: Any = None) -> None:
        """Read the store's index before the first request: a request that waits for
        it holds a place of the downloader (while Scrapy, its downloader full, keeps
        reading start requests into the scheduler)."""
        if self._failed:
            return
        try:
            await self.store.open()
        except StoreError as exc:
            self._fail(exc)

    async def fetch(
        self,
        authority: str,
        previous: RobotsEntry | None = None,
        revalidate: Revalidation | None = None,
        route: dict[str, Any] | None = None,
    ) -> Fetched:
        record = await self._get(authority)
        now = wall_clock()
        if record is not None and record.fresh(now, self.config.policy.cache_ttl):
            this_run = record.fetched_at >= self.started
            self.stats.inc_value("rfc9309/this_run_hit" if this_run else "rfc9309/persistent_hit")
            return await self._from_record(authority, record, now)
        if record is not None and record.outcome == FetchOutcome.SUCCESS and record.body:
            robots = await parse_body(self.config, record.body)
            revalidate = Revalidation(robots, record.body, record.etag, record.last_modified)
            if previous is None:  # the last good copy while the site is unreachable
                previous = self.config.policy.success(robots, monotonic(), record.status)
        fetched = await self.fetcher.fetch(authority, previous, revalidate, route)
        if fetched.not_modified:
            self.stats.inc_value("rfc9309/not_modified")
        await self._put(authority, fetched)
        return fetched

    async def _from_record(self, authority: str, record: StoredRobots, now: float) -> Fetched:
        outcome = FetchOutcome(record.outcome)
        robots = await parse_body(self.config, record.body) if record.body is not None else None
        fresh_for = record.fetched_at + self.config.policy.cache_ttl - now
        entry = entry_for(
            self.config,
            outcome,
            record.status,
            robots,
            record.reason,
            fresh_for,
            kept_since=record.fetched_at,
        )
        url = f"{authority}/robots.txt"
        request = Request(url, callback=NO_CALLBACK, dont_filter=True)
        return Fetched(entry, url, request, body=record.body)

    async def _get(self, authority: str) -> StoredRobots | None:
        if self._failed:
            return None
        try:
            record = await self.store.get(authority)
        except StoreError as exc:
            self._fail(exc)
            return None
        if self.store.replaced is not None and not self._replaced_said:
            self._replaced_said = True
            self.stats.inc_value("rfc9309/persistent_replaced")
            logger.warning(
                "The robots.txt cache was damaged (%s): robots.txt files are fetched again",
                self.store.replaced,
            )
        return record

    async def _put(self, authority: str, fetched: Fetched) -> None:
        if self._failed or fetched.kept:
            return
        try:
            record = await record_to_keep(self.store, authority, fetched, self.config)
            if record is None:
                return
            await self.store.put(authority, record)
            also_for = fetched.also_for(authority)
            if also_for is not None:  # the file of another authority too
                await self.store.put(also_for, record)
        except StoreError as exc:
            self._fail(exc)

    def _fail(self, exc: StoreError) -> None:
        """The store failed: this crawl goes on without it (fetching as usual)."""
        self._failed = True
        self.stats.inc_value("rfc9309/persistent_error")
        logger.warning("%s; robots.txt is fetched as if there were no cache", exc)

    async def close(self) -> None:
        """Close the store once this crawl's copies are written (a failed write is
        said here if nothing said it before)."""
        try:
            await self.store.close()
        except StoreError as exc:
            if not self._failed:
                self._fail(exc)


async def record_to_keep(
    store: RobotsStore, authority: str, fetched: Fetched, config: RobotsSettings
) -> StoredRobots | None:
    """What *store* keeps across restarts for *authority* of *fetched*: see
    :func:`kept_record`; for a copy at hand of another authority's file (it has no
    body of its own), that authority's record in *store*, while it is fresh."""
    if not fetched.from_copy:
        return kept_record(fetched, config.max_bytes)
    other = own_robots_of(fetched.url, authority)
    record = await store.get(other) if other is not None else None
    if record is None or record.outcome != FetchOutcome.SUCCESS or record.body is None:
        return None
    return record if record.fresh(wall_clock(), config.policy.cache_ttl) else None


def kept_record(fetched: Fetched, max_bytes: int) -> StoredRobots | None:
    """What is kept across restarts of *fetched*, fetched now: ``None`` for an
    unreachable site (the last good copy stays), or another authority's copy at hand
    (it has no body to keep: see :func:`record_to_keep`)."""
    entry = fetched.entry
    if entry.outcome not in (FetchOutcome.SUCCESS, FetchOutcome.UNAVAILABLE) or fetched.from_copy:
        return None
    body = fetched.body if entry.outcome is FetchOutcome.SUCCESS else None
    return StoredRobots(
        outcome=entry.outcome.value,
        status=entry.status,
        body=body[: max_bytes + 1] if body is not None else None,
        fetched_at=wall_clock(),
        ttl=entry.expires_at - entry.fetched_at,
        etag=fetched.etag,
        last_modified=fetched.last_modified,
        reason=entry.reason,
    )
