"""robots.txt fetched once per authority for a whole fleet (``FLEET_REDIS_URL``).

:class:`SharedRobotsFetcher` is a :class:`~._fetch.Fetcher` around another one: it
first reads the fleet's copy in Redis; without one, the process that takes the lock
fetches and publishes, and the others wait for its copy (for at most the fetch's
timeout and a margin: the lock expires then, so a process killed mid-fetch blocks
nobody for longer).  If Redis fails, the process fetches by itself, as a lone
process would (see :mod:`scrapy_rfc9309.fleet.health`).

When the fleet keeps robots.txt across restarts (``RFC9309_PERSISTENT_CACHE``, in the
same Redis), that copy is the fleet's only one: a fetch is published by writing it
there, and read from there while it is fresh by this crawl's ``RFC9309_CACHE_TTL``.
Only what is not kept (an unreachable site: the last good copy stays) is published
as a separate, short-lived key.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from dataclasses import replace
from time import monotonic
from time import time as wall_clock
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http.request import NO_CALLBACK

from ..._shared import RobotsFetchPutOff
from ...fleet.health import fleet_health
from ...fleet.robots import SharedFetch, SharedRobots, SharedRobotsError
from ...robots import FetchOutcome, RedisRobotsStore, RobotsEntry, StoreError
from ._fetch import Fetched, Revalidation, RobotsFetcher, entry_for, parse_body
from ._persistent import record_to_keep

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


#: How often a process waiting for another one's fetch looks for its copy.
POLL_INTERVAL = 0.1
#: A lock outlives the fetch's timeout by this much.
LOCK_MARGIN = 5.0


class SharedRobotsFetcher:
    def __init__(
        self,
        crawler: Crawler,
        fetcher: RobotsFetcher,
        url: str,
        kept: RedisRobotsStore | None = None,
    ) -> None:
        self.fetcher = fetcher
        self.config = fetcher.config
        self.stats = crawler.stats
        self.shared = SharedRobots(url)
        #: The store kept across restarts, in the fleet's Redis, if the crawl keeps one.
        self.kept = kept
        self.health = fleet_health(crawler)
        self.lock_life = self.config.timeout + LOCK_MARGIN

    async def fetch(
        self,
        authority: str,
        previous: RobotsEntry | None = None,
        revalidate: Revalidation | None = None,
        route: dict[str, Any] | None = None,
    ) -> Fetched:
        if self.health.usable():
            try:
                return await self._fetch_shared(authority, previous, revalidate, route)
            except SharedRobotsError as exc:
                self.health.failed(exc, "fleet/robots_error")
        return await self.fetcher.fetch(authority, previous, revalidate, route)

    async def _fetch_shared(
        self,
        authority: str,
        previous: RobotsEntry | None,
        revalidate: Revalidation | None,
        route: dict[str, Any] | None,
    ) -> Fetched:
        deadline = monotonic() + self.lock_life
        while True:
            asked, asked_at = secrets.token_hex(8), monotonic()
            try:
                shared, token = await self._read_or_lock(authority, asked)
            except SharedRobotsError:
                self._let_go_later(authority, asked)  # Redis may have locked it
                raise
            self.health.answered(asked_at)
            if shared is not None:
                if token is not None:  # the kept copy, fresh: taken in vain
                    await self._release(authority, token)
                self.stats.inc_value("fleet/robots_shared")
                return await self._from_shared(authority, shared, previous)
            if token is not None:
                return await self._fetch_and_publish(authority, previous, revalidate, route, token)
            if monotonic() > deadline:  # the holder is gone or stuck: fetch here
                return await self.fetcher.fetch(authority, previous, revalidate, route)
            await asyncio.sleep(POLL_INTERVAL)

    async def _read_or_lock(
        self, authority: str, token: str
    ) -> tuple[SharedFetch | None, str | None]:
        """The fleet's current result for *authority*: the kept copy while it is
        fresh, if the fleet keeps one, else what was published; and the lock, taken
        when nothing was published (the kept copy's freshness is this crawl's to
        judge), all in one round trip."""
        kept_key = self.kept.key(authority) if self.kept is not None else None
        shared, data, locked = await self.shared.read_or_lock(
            authority, self.lock_life, kept_key, token
        )
        if self.kept is None or data is None:
            return shared, locked
        record = self.kept.decode(data)
        now, ttl = wall_clock(), self.config.policy.cache_ttl
        if record is None or not record.fresh(now, ttl):
            return shared, locked
        fresh_for = record.fetched_at + ttl - now
        kept = SharedFetch(record.outcome, record.status, record.body, fresh_for, record.reason)
        return kept, locked

    async def _fetch_and_publish(
        self,
        authority: str,
        previous: RobotsEntry | None,
        revalidate: Revalidation | None,
        route: dict[str, Any] | None,
        token: str,
    ) -> Fetched:
        try:
            fetched = await self.fetcher.fetch(authority, previous, revalidate, route)
        except RobotsFetchPutOff:  # nothing to publish: another process may try
            self._let_go_later(authority, token)
            raise
        try:
            fetched = await self._publish(authority, fetched, token)
        except SharedRobotsError as exc:  # fetched all the same: no second fetch
            self.health.failed(exc, "fleet/robots_error")
            self._let_go_later(authority, token)
        else:
            self.stats.inc_value("fleet/robots_fetched")
        return fetched

    async def _publish(self, authority: str, fetched: Fetched, token: str) -> Fetched:
        try:
            record = None
            if self.kept is not None:
                record = await record_to_keep(self.kept, authority, fetched, self.config)
        except StoreError as exc:
            raise SharedRobotsError(str(exc)) from exc
        if record is None:
            if fetched.from_copy:  # no file to share: the others fetch for themselves
                await self._release(authority, token)
            else:
                await self.shared.publish(authority, _to_shared(fetched), token)
            return fetched
        assert self.kept is not None
        try:
            await self.kept.put(authority, record)
            also_for = fetched.also_for(authority)
            if also_for is not None:  # the file of another authority too
                await self.kept.put(also_for, record)
        except StoreError as exc:
            raise SharedRobotsError(str(exc)) from exc
        await self._release(authority, token)
        return replace(fetched, kept=True)

    async def _release(self, authority: str, token: str) -> None:
        try:
            await self.shared.release(authority, token)
        except SharedRobotsError:
            self._let_go_later(authority, token)
            raise

    def _let_go_later(self, authority: str, token: str) -> None:
        """Let go of the lock on *authority* if *token* holds it, once Redis answers:
        else the other processes would wait for that robots.txt until the lock's
        life ends."""
        release = functools.partial(self.shared.release, authority, token)
        self.health.owe(release, self.lock_life, "fleet/robots_error")

    async def _from_shared(
        self, authority: str, shared: SharedFetch, previous: RobotsEntry | None
    ) -> Fetched:
        outcome = FetchOutcome(shared.outcome)
        body = shared.body
        robots = await parse_body(self.config, body) if body is not None else None
        entry = entry_for(
            self.config, outcome, shared.status, robots, shared.reason, shared.ttl, previous
        )
        url = f"{authority}/robots.txt"
        request = Request(url, callback=NO_CALLBACK, dont_filter=True)
        return Fetched(entry, url, request, body=shared.body, kept=self.kept is not None)

    async def close(self) -> None:
        await self.health.close()
        self.shared.close()


def _to_shared(fetched: Fetched) -> SharedFetch:
    entry = fetched.entry
    body = fetched.body if entry.outcome is FetchOutcome.SUCCESS else None
    ttl = entry.expires_at - entry.fetched_at
    return SharedFetch(entry.outcome.value, entry.status, body, ttl, entry.reason)
