"""Backing off, for the Crawl-delay throttle: a response with a "slow down" status
(``BACKOFF_HTTP_CODES``) holds its politeness unit (see :mod:`scrapy_rfc9309.backoff`
for how long).

The hold is kept where every request must pass, whatever sent it (the scheduler,
Scrapy's ``RetryMiddleware``, the robots middleware's refetch): the gate
(:mod:`._gate`) starts no request of a held unit, and the scheduler's queues hand
none out before the hold is about to end.  While a unit backs off, its floor is at
least ``BACKOFF_DELAY`` (one request at a time, end to start).  With
``FLEET_REDIS_URL``, the hold is written to the fleet's Redis too, where the other
processes find it (see :mod:`._fleet`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING

from ...backoff import UnitBackoff, parse_retry_after
from ._units import unit_name

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from ..._settings import BackoffSettings
    from ._fleet import FleetGates

logger = logging.getLogger(__name__)

#: The close report names at most this many units (the longest held).
REPORTED_UNITS = 10


class Backoff:
    """Holds the units of one crawler that answered "slow down".  *changed(key)* is
    called when unit *key* is held anew."""

    def __init__(
        self,
        crawler: Crawler,
        config: BackoffSettings,
        fleet: FleetGates | None,
        changed: Callable[[str], None],
    ) -> None:
        self.stats = crawler.stats
        self.unit_name = unit_name(crawler.settings)
        self.codes = config.codes
        self.units = UnitBackoff(
            start=config.start,
            maximum=config.maximum,
            forgive_after=config.forgive_after,
            max_retry_after=config.max_retry_after,
            delay=config.delay,
        )
        self._fleet = fleet
        self._changed = changed
        self._capped_said: set[str] = set()

    # -- asked by the throttle, the gate and the queues --------------------

    def delay(self, key: str) -> float:
        """The least spacing of unit *key* while it backs off, else 0."""
        return self.units.delay(key, monotonic())

    def held_until(self, key: str) -> float:
        """Until when unit *key* is held, in ``time.monotonic()`` seconds (0: never)."""
        return self.units.held_until(key)

    # -- events ------------------------------------------------------------

    def downloaded(self, response: Response, key: str) -> bool:
        """A response from unit *key* arrived: if it says "slow down", hold the unit
        and return True."""
        if response.status not in self.codes:
            return False
        seconds = self._retry_after(response, key)
        incident = self.units.incident(key, monotonic(), seconds)
        if incident.new:
            self.stats.inc_value("backoff/holds")
            logger.debug(
                "%s answered %s: no request to %s for %.3g s",
                response.url,
                response.status,
                key,
                incident.seconds,
            )
        if incident.capped:
            self.stats.inc_value("backoff/retry_after_capped")
            if key not in self._capped_said:
                self._capped_said.add(key)
                logger.info(
                    "%s asked to wait %.6g s (Retry-After); held for "
                    "BACKOFF_MAX_RETRY_AFTER = %.6g s",
                    key,
                    seconds,
                    self.units.max_retry_after,
                )
        self._changed(key)
        if self._fleet is not None:
            self._fleet.hold(key, incident.seconds)
        return True

    def _retry_after(self, response: Response, key: str) -> float | None:
        retry_after = parse_retry_after(response.headers.get(b"Retry-After"), time.time())
        if retry_after is None:
            return None
        if retry_after.seconds is None:
            self.stats.inc_value("backoff/retry_after_ignored")
            logger.debug("%s: Retry-After ignored: %s", key, retry_after.problem)
            return None
        # In whole seconds, as Scrapy's own stats: a collector that reads its values
        # back as integers (scrapy-redis's) raised at the next 429 on "2.0".
        self.stats.max_value("backoff/retry_after_max", math.ceil(retry_after.seconds))
        return retry_after.seconds

    def learn(self, key: str, seconds: float) -> None:
        """Another process of the fleet holds unit *key* for *seconds* more."""
        self.stats.inc_value("backoff/fleet_holds_learnt")
        self.units.learn(key, monotonic(), seconds)
        self._changed(key)

    def close(self) -> None:
        """Report, per unit, its holds."""
        held = self.units.report(monotonic())
        if not held:
            return
        total = sum(seconds for _, seconds, _ in held)
        self.stats.set_value("backoff/units_held", len(held))
        self.stats.set_value("backoff/held_seconds", round(total, 3))
        lines = []
        for key, seconds, record in held[:REPORTED_UNITS]:
            largest = record.largest_retry_after
            said = f", largest Retry-After {largest:.6g} s" if largest is not None else ""
            lines.append(f"  {key}: {record.holds} hold(s), {seconds:.1f} s held{said}")
        if len(held) > REPORTED_UNITS:
            lines.append(f"  and {len(held) - REPORTED_UNITS} more {self.unit_name}(s)")
        logger.info(
            "Backed off %d %s(s) that asked to slow down, %.1f s held in all:\n%s",
            len(held),
            self.unit_name,
            total,
            "\n".join(lines),
        )
