"""Backing off, for the Crawl-delay throttle: a response with a "slow down" status
(``BACKOFF_HTTP_CODES``) holds its host (see :mod:`scrapy_rfc9309.backoff` for how long).

The hold is kept where every request to the host must pass, whatever sent it (the
scheduler, Scrapy's ``RetryMiddleware``, the robots middleware's refetch): the
download slot.  While a host backs off, the throttle floors its slot at
``BACKOFF_DELAY`` or more (one request at a time, end to start), and the slot's gate
admits no request while the host is held.  The scheduler's queues read the hold from
the :class:`~.._hostclock.HostClock` and keep the host's requests meanwhile.  With
``FLEET_REDIS_URL``, the hold is written to the fleet's Redis too, where the other
processes find it (see :mod:`._fleet`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from scrapy.utils.asyncio import CallLaterResult, call_later

from ...backoff import HostBackoff, parse_retry_after
from . import _slots

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from ..._settings import BackoffSettings
    from ._fleet import FleetGates

logger = logging.getLogger(__name__)

#: The close report names at most this many hosts (the longest held).
REPORTED_HOSTS = 10


class Backoff:
    """Holds the hosts of one crawler that answered "slow down".  *wake(key)* is
    called when the hold of slot *key* ends."""

    def __init__(
        self,
        crawler: Crawler,
        config: BackoffSettings,
        fleet: FleetGates | None,
        wake: Callable[[str], None],
    ) -> None:
        self.stats = crawler.stats
        self.codes = config.codes
        self.hosts = HostBackoff(
            start=config.start,
            maximum=config.maximum,
            forgive_after=config.forgive_after,
            max_retry_after=config.max_retry_after,
            delay=config.delay,
        )
        self._fleet = fleet
        self._wake = wake
        self._capped_said: set[str] = set()
        self._wakes: dict[str, CallLaterResult] = {}  # slot key -> pending wake

    # -- asked by the throttle, the gate and the queues --------------------

    def delay(self, key: str) -> float:
        """The least spacing of slot *key* while it backs off, else 0."""
        return self.hosts.delay(key, _slots.slot_clock())

    def held_until(self, key: str) -> float:
        """Until when slot *key* is held, on the slot clock (0: never held)."""
        return self.hosts.held_until(key)

    def held(self, key: str) -> bool:
        return _slots.slot_clock() < self.hosts.held_until(key)

    # -- events ------------------------------------------------------------

    def downloaded(self, response: Response, request: Request) -> str | None:
        """A response arrived: if it says "slow down", hold its slot and return its
        key."""
        if response.status not in self.codes:
            return None
        key = _slots.slot_key(request)
        if key is None:
            return None
        seconds = self._retry_after(response, key)
        incident = self.hosts.incident(key, _slots.slot_clock(), seconds)
        if incident.new:
            self.stats.inc_value("backoff/holds")
            logger.debug(
                "%s answered %s: no request to slot %s for %.3g s",
                request.url,
                response.status,
                key,
                incident.seconds,
            )
        if incident.capped:
            self.stats.inc_value("backoff/retry_after_capped")
            if key not in self._capped_said:
                self._capped_said.add(key)
                logger.info(
                    "Slot %s asked to wait %.6g s (Retry-After); held for "
                    "BACKOFF_MAX_RETRY_AFTER = %.6g s",
                    key,
                    seconds,
                    self.hosts.max_retry_after,
                )
        self._wake_in(key, incident.seconds)
        if self._fleet is not None:
            self._fleet.hold(key, incident.seconds)
        return key

    def _retry_after(self, response: Response, key: str) -> float | None:
        retry_after = parse_retry_after(response.headers.get(b"Retry-After"), time.time())
        if retry_after is None:
            return None
        if retry_after.seconds is None:
            self.stats.inc_value("backoff/retry_after_ignored")
            logger.debug("Slot %s: Retry-After ignored: %s", key, retry_after.problem)
            return None
        self.stats.max_value("backoff/retry_after_max", retry_after.seconds)
        return retry_after.seconds

    def learn(self, key: str, seconds: float) -> None:
        """Another process of the fleet holds slot *key* for *seconds* more."""
        self.stats.inc_value("backoff/fleet_holds_learnt")
        self.hosts.learn(key, _slots.slot_clock(), seconds)
        self._wake_in(key, seconds)

    def _wake_in(self, key: str, seconds: float) -> None:
        pending = self._wakes.pop(key, None)
        if pending is not None:
            pending.cancel()
        self._wakes[key] = call_later(seconds, self._ended, key)

    def _ended(self, key: str) -> None:
        self._wakes.pop(key, None)
        self._wake(key)

    def close(self) -> None:
        """Cancel the pending wakes; report, per host, its holds."""
        for pending in self._wakes.values():
            pending.cancel()
        self._wakes.clear()
        held = self.hosts.report(_slots.slot_clock())
        if not held:
            return
        total = sum(seconds for _, seconds, _ in held)
        self.stats.set_value("backoff/hosts_held", len(held))
        self.stats.set_value("backoff/held_seconds", round(total, 3))
        lines = []
        for key, seconds, record in held[:REPORTED_HOSTS]:
            largest = record.largest_retry_after
            said = f", largest Retry-After {largest:.6g} s" if largest is not None else ""
            lines.append(f"  {key}: {record.holds} hold(s), {seconds:.1f} s held{said}")
        if len(held) > REPORTED_HOSTS:
            lines.append(f"  and {len(held) - REPORTED_HOSTS} more host(s)")
        logger.info(
            "Backed off %d host(s) that asked to slow down, %.1f s held in all:\n%s",
            len(held),
            total,
            "\n".join(lines),
        )
