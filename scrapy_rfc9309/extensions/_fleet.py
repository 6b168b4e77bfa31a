"""Fleet-wide spacing for the Crawl-delay throttle: a floored slot releases a request
only at a start time reserved in the fleet's Redis (``FLEET_REDIS_URL``).

When the slot could release its next request (its own floor has passed), its gate
reserves the fleet's next start for that host (one Redis call) and admits the request
at that time; meanwhile the request waits in the slot's queue, where it holds no
download of its own.  As a request leaves with another queued behind it, the gate
reserves that one's start at once: one reservation ahead per host at most, never one
per queued request.  If Redis fails, the gate admits at once: the process keeps its
local floor, no less polite than a lone process (see :mod:`.._fleet_health`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .._fleet_health import fleet_health
from ..fleet.spacing import FleetSpacing, SpacingError
from . import _slots

if TYPE_CHECKING:
    from scrapy.core.downloader import Slot
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Starts are reserved this much further apart than the floor (a share of it, at
#: least MARGIN_MIN and at most MARGIN_MAX seconds): a request leaves a little after
#: its reserved start, and the site must never see two requests closer than the
#: floor.  The minimum is what a busy event loop may take to act on a timer: with
#: less, a tiny floor's starts would mostly be missed and reserved again.
MARGIN_SHARE = 0.05
MARGIN_MIN = 0.002
MARGIN_MAX = 0.05


def margin(floor: float) -> float:
    """How much further apart than *floor* starts are reserved, and so how late a
    reserved start may still be used without coming closer than *floor* to the next."""
    return min(max(floor * MARGIN_SHARE, MARGIN_MIN), MARGIN_MAX)


class FleetGates:
    """One gate per floored slot key, sharing one Redis connection."""

    def __init__(self, crawler: Crawler, url: str) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.spacing = FleetSpacing(url)
        self.health = fleet_health(crawler)
        self._gates: dict[str, _Gate] = {}

    def gate(self, key: str) -> _Gate:
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = _Gate(self, key)
        return gate

    def forget(self, key: str) -> None:
        """Drop the gate of a slot key no longer in use (a broad crawl meets many)."""
        self._gates.pop(key, None)

    async def reserve(self, key: str, floor: float) -> float:
        """Seconds to wait before slot *key*'s next request may start (0 without Redis)."""
        if not self.health.usable():
            self.stats.inc_value("fleet/spacing_local")
            return 0.0
        try:
            wait = await self.spacing.reserve(key, floor + margin(floor))
        except SpacingError as exc:
            self.health.failed(exc, "fleet/spacing_error")
            return 0.0
        self.health.answered()
        self.stats.inc_value("fleet/spacing_reserved")
        return wait

    def close(self) -> None:
        self.spacing.close()


class _Gate:
    """Admits one request per start time reserved for the fleet."""

    def __init__(self, gates: FleetGates, key: str) -> None:
        self._gates = gates
        self._key = key
        self._ticket: float | None = None  # a reserved start, on the slot clock
        self._pending: asyncio.Future[None] | None = None

    def admits(self, slot: Slot) -> bool:
        ticket, now = self._ticket, _slots.slot_clock()
        if ticket is not None and _slots.last_start(slot) < ticket:  # not used yet
            if now < ticket:
                return False  # wake() comes at its time
            if now <= ticket + margin(_slots.floor_of(slot)):
                if _slots.queued(slot) > 1:
                    # Scrapy sends this request on a True; reserve the start of the
                    # one behind it now, so that the round trip overlaps the wait.
                    self._reserve_next(slot)
                return True
            # Too late: another process may start at ticket + floor + margin; reserve anew.
        self._reserve_next(slot)
        return False

    def _reserve_next(self, slot: Slot) -> None:
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._reserve(_slots.floor_of(slot)))

    async def _reserve(self, floor: float) -> None:
        try:
            wait = await self._gates.reserve(self._key, floor)
        except Exception:  # a bug: never leave the slot's requests waiting for good
            logger.error("Fleet spacing failed for slot %s", self._key, exc_info=True)
            wait = 0.0
        finally:
            self._pending = None
        self._ticket = _slots.slot_clock() + wait
        loop = asyncio.get_running_loop()
        loop.call_later(wait, _slots.wake, self._gates.crawler, self._key)
