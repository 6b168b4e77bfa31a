"""Fleet-wide spacing for the Crawl-delay throttle: a floored slot starts a request
only once the fleet's Redis (``FLEET_REDIS_URL``) holds the host for it, and lets it
go when the request ends (see :mod:`scrapy_rfc9309.fleet.spacing`: end to start, across processes).

The gate is asked only when the slot's own floor has passed and nothing of its own is
on the wire; it then asks Redis (one call), and the request waits in the slot's queue
meanwhile, holding no download.  If Redis fails, the gate admits at once: the process
keeps its own floor, no less polite than a lone process (see :mod:`scrapy_rfc9309.fleet.health`).

A host that asked to slow down is held in Redis too (:meth:`FleetGates.hold`): the
gate of every process waits for it, and :meth:`FleetGates.holds` tells the throttle
which hosts to hold and floor before their next request reaches the gate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from ...fleet.health import fleet_health
from ...fleet.spacing import FleetSpacing, SpacingError
from . import _slots

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class FleetGates:
    """Holds and lets go of hosts in the fleet's Redis for one crawler.

    *lease* is the longest a request may be on the wire (its download timeout and a
    margin): a process killed mid-request holds its hosts no longer.
    """

    def __init__(self, crawler: Crawler, url: str, lease: float) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.spacing = FleetSpacing(url)
        self.health = fleet_health(crawler)
        self.lease = lease
        self._held: set[str] = set()  # hosts Redis holds for this process, not yet started
        self._asking: set[str] = set()
        self._calls: set[asyncio.Future[None]] = set()  # kept until done
        self._closed = False

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        call = asyncio.ensure_future(coro)
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)

    def admits(self, key: str, floor: float) -> bool:
        """True if slot *key* may start its request now (Redis holds the host for it)."""
        if key in self._held:
            self._held.discard(key)
            return True
        if not self.health.usable():
            self.stats.inc_value("fleet/spacing_local")
            return True
        if key not in self._asking:
            self._asking.add(key)
            self._call(self._acquire(key, floor))
        return False

    async def _acquire(self, key: str, floor: float) -> None:
        try:
            wait = await self.spacing.acquire(key, floor, self.lease + floor)
        except SpacingError as exc:
            if self._closed:
                return
            self.health.failed(exc, "fleet/spacing_error")
            wait = 0.0  # admitted locally from now on (health is down)
        except Exception:  # a bug: never leave the slot's requests waiting for good
            logger.error("Fleet spacing failed for slot %s", key, exc_info=True)
            wait = 0.0
        else:
            self.health.answered()
            if not wait:
                self.stats.inc_value("fleet/spacing_acquired")
                self._held.add(key)
        finally:
            self._asking.discard(key)
        live = _slots.slot(self.crawler, key)
        if key in self._held and (live is None or not _slots.queued(live)):
            self._held.discard(key)  # nothing left to send: let the fleet go on
            await self.release(key, floor)
            return
        loop = asyncio.get_running_loop()
        loop.call_later(wait, _slots.wake, self.crawler, key)

    def ended(self, key: str, floor: float) -> None:
        """A request of slot *key* ended now: the fleet's next one waits *floor*."""
        self._call(self.release(key, floor))

    async def release(self, key: str, floor: float) -> None:
        if not self.health.usable():
            return
        try:
            await self.spacing.release(key, floor)
        except SpacingError as exc:
            if not self._closed:  # else cut off by close(): the lease ends the hold
                self.health.failed(exc, "fleet/spacing_error")

    def hold(self, key: str, seconds: float) -> None:
        """Slot *key* asked to slow down: hold it in every process for *seconds*."""
        if self.health.usable():
            self._call(self._hold(key, seconds))

    async def _hold(self, key: str, seconds: float) -> None:
        try:
            await self.spacing.hold(key, seconds)
        except SpacingError as exc:
            if not self._closed:  # the local hold stands
                self.health.failed(exc, "fleet/spacing_error")

    async def holds(self) -> list[tuple[str, float]]:
        """The slot keys the fleet holds now, each with the seconds left ([] if Redis
        cannot say).  A failed read is only counted: the next one is half a second
        away, and the process's gates keep asking Redis before each floored request
        (a slow read at start-up must not make the process leave the fleet)."""
        if not self.health.usable():
            return []
        try:
            return await self.spacing.holds()
        except SpacingError:
            self.stats.inc_value("fleet/holds_read_error")
            return []

    def close(self) -> None:
        self._closed = True
        self.spacing.close()
