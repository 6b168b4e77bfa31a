"""Fleet-wide spacing for the Crawl-delay throttle: a floored unit starts a request
only once the fleet's Redis (``FLEET_REDIS_URL``) holds it for this process, and lets
it go when the request ends (see :mod:`scrapy_rfc9309.fleet.spacing`: end to start,
across processes).

The gate asks only when the unit is ready in this process; a request waits in the
gate meanwhile.  If Redis fails, the gate admits at once: the process keeps its own
floor, no less polite than a lone process (see :mod:`scrapy_rfc9309.fleet.health`).

A unit that asked to slow down is held in Redis too (:meth:`FleetGates.hold`): the
gate of every process waits for it, and :meth:`FleetGates.holds` tells the throttle
which units to hold before their next request reaches the gate.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from time import monotonic
from typing import TYPE_CHECKING, Any

from ...fleet.health import fleet_health
from ...fleet.spacing import FleetSpacing, SpacingError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class FleetGates:
    """Holds and lets go of units in the fleet's Redis for one crawler.

    *lease* is the longest a request may be on the wire (its download timeout and a
    margin): a process killed mid-request holds its units no longer.
    """

    def __init__(self, crawler: Crawler, url: str, lease: float) -> None:
        self.stats = crawler.stats
        self.spacing = FleetSpacing(url)
        self.health = fleet_health(crawler)
        self.lease = lease
        self._calls: set[asyncio.Future[None]] = set()  # kept until done
        #: The token of each unit Redis holds for this process (one request at a
        #: time): its release names it, so that one that comes late (the unit's lease
        #: ended, and another process took it) frees nothing.
        self._tokens: dict[str, str] = {}
        self._token = f"{uuid.uuid4().hex}:"
        self._acquisitions = itertools.count()
        self._closed = False

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        call = asyncio.ensure_future(coro)
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)

    async def acquire(self, key: str, floor: float, held: str | None = None) -> float:
        """0 once Redis holds unit *key* for this process (or cannot say: Redis
        failed), else the seconds to wait before asking again.  *held*: the token
        this process holds the unit with already (a shared queue's pop), asked
        again for *floor*; its release is the queue's."""
        if not self.health.usable():
            self.stats.inc_value("fleet/spacing_local")
            return 0.0
        token = held or f"{self._token}{next(self._acquisitions)}"
        asked = monotonic()
        try:
            wait = await self.spacing.acquire(key, floor, self.lease + floor, token)
        except SpacingError as exc:
            if held is None:
                # Redis may have held the unit before the reply was lost: the
                # request's end lets go of it with this token, or the fleet would
                # wait for the unit until the lease ends.
                self._tokens[key] = token
            if not self._closed:
                self.health.failed(exc, "fleet/spacing_error")
            return 0.0
        self.health.answered(asked)
        if not wait and held is None:
            self._tokens[key] = token
            self.stats.inc_value("fleet/spacing_acquired")
        return wait

    def release(self, key: str, floor: float, reached: bool = True) -> None:
        """A request of unit *key* ended now: the fleet's next one waits *floor* (none
        for this one, if it did not reach the site).  Only a unit this process asked
        Redis to hold is let go of (a release without its token would free whichever
        request holds it)."""
        token = self._tokens.pop(key, None)
        if token is None:
            return
        release = functools.partial(self.spacing.release, key, floor, token, reached)
        if self.health.usable():
            self._call(self._release(release, floor))
        else:  # told once Redis answers, else the fleet waits until the lease ends
            self.health.owe(release, self.lease + floor, "fleet/spacing_error")

    async def _release(self, release: Callable[[], Awaitable[None]], floor: float) -> None:
        try:
            await release()
        except SpacingError as exc:
            if not self._closed:  # after close(), the lease ends the hold
                self.health.failed(exc, "fleet/spacing_error")
                self.health.owe(release, self.lease + floor, "fleet/spacing_error")

    def hold(self, key: str, seconds: float) -> None:
        """Unit *key* asked to slow down: hold it in every process for *seconds*."""
        if self.health.usable():
            self._call(self._hold(key, seconds))

    async def _hold(self, key: str, seconds: float) -> None:
        try:
            await self.spacing.hold(key, seconds)
        except SpacingError as exc:
            if not self._closed:  # the local hold stands
                self.health.failed(exc, "fleet/spacing_error")

    async def holds(self) -> list[tuple[str, float]]:
        """The unit keys the fleet holds now, each with the seconds left ([] if Redis
        cannot say).  A failed read is only counted: the next one is half a second
        away, and the gates keep asking Redis before each floored request (a slow
        read at start-up must not make the process leave the fleet)."""
        if not self.health.usable():
            return []
        try:
            return await self.spacing.holds()
        except SpacingError:
            self.stats.inc_value("fleet/holds_read_error")
            return []

    async def close(self) -> None:
        """The crawl closes: the releases in flight and those owed go to Redis if it
        answers (else the leases end the holds), then the connection."""
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
        self._closed = True
        await self.health.close()
        self.spacing.close()
