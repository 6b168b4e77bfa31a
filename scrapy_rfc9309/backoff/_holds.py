"""How long each host is held after it asked to slow down, and what it was held.

An *incident* is a "slow down" answer that arrives while its host is not held
already (answers to requests that were on the wire together make one incident).  A
host is held for its ``Retry-After`` when there is one (up to ``max_retry_after``);
without one, for ``start`` seconds doubled per incident up to ``maximum``, plus up
to ``jitter`` of it at random (so that hosts held together are not all released at
once; jitter only lengthens a hold).  A host quiet for ``forgive_after`` seconds
after its hold ended is forgiven: its next incident counts as the first.  Until
then, it is *backing off*: its requests are spaced at least ``delay`` apart.

Times are seconds on the caller's monotonic clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(slots=True)
class UnitRecord:
    """One host's incidents and holds."""

    incidents: int = 0  # since it was last forgiven
    until: float = 0.0  # held until then; forgiveness counts from here
    holds: int = 0  # all incidents, for the report
    held: float = 0.0  # seconds held in all
    largest_retry_after: float | None = None  # as received, before the cap

    def held_by(self, now: float) -> float:
        """The seconds held until *now*: a hold still running counts up to now."""
        return self.held - max(self.until - now, 0.0)


@dataclass(frozen=True, slots=True)
class Incident:
    """What one "slow down" answer did: the host is held ``seconds`` from now;
    ``new`` is False when it arrived while the host was held already; ``capped``
    when its ``Retry-After`` was longer than the cap."""

    seconds: float
    new: bool
    capped: bool = False


class UnitBackoff:
    def __init__(
        self,
        *,
        start: float,
        maximum: float,
        forgive_after: float,
        max_retry_after: float,
        delay: float,
        jitter: float = 0.1,
        rng: random.Random | None = None,
    ) -> None:
        self.start = start
        self.maximum = maximum
        self.forgive_after = forgive_after
        self.max_retry_after = max_retry_after
        self._delay = delay
        self.jitter = jitter
        self._random = (rng or random.Random()).random
        self.records: dict[str, UnitRecord] = {}

    def incident(self, key: str, now: float, retry_after: float | None) -> Incident:
        """Host *key* answered "slow down" at *now*, with *retry_after* seconds if its
        answer said (``None``: it did not, or not usably)."""
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = UnitRecord()
        elif self._forgiven(record, now):
            record.incidents = 0
        new = now >= record.until
        if new:
            record.incidents += 1
            record.holds += 1
        capped = False
        if retry_after is not None:
            capped = retry_after > self.max_retry_after
            seconds = min(retry_after, self.max_retry_after)
            largest = record.largest_retry_after
            record.largest_retry_after = max(retry_after, largest or 0.0)
        elif new:
            grown = min(self.start * 2.0 ** min(record.incidents - 1, 64), self.maximum)
            seconds = grown * (1.0 + self.jitter * self._random())
        else:
            seconds = 0.0  # the running hold stands
        self._hold(record, now, seconds)
        return Incident(record.until - now, new, capped)

    def learn(self, key: str, now: float, seconds: float) -> None:
        """Another process holds host *key* for *seconds* from *now*: hold it here too
        (it is not this process's incident: its report leaves it out)."""
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = UnitRecord()
        record.until = max(record.until, now + seconds)

    def _hold(self, record: UnitRecord, now: float, seconds: float) -> None:
        until = now + seconds
        if until > record.until:
            record.held += until - max(record.until, now)
            record.until = until

    def _forgiven(self, record: UnitRecord, now: float) -> bool:
        return now - record.until > self.forgive_after

    def held_until(self, key: str) -> float:
        """Until when host *key* is held (0 if it never was)."""
        record = self.records.get(key)
        return record.until if record is not None else 0.0

    def delay(self, key: str, now: float) -> float:
        """The least spacing of host *key*'s requests: ``delay`` while it backs off,
        else 0."""
        record = self.records.get(key)
        if record is None or self._forgiven(record, now):
            return 0.0
        return self._delay

    def report(self, now: float) -> list[tuple[str, float, UnitRecord]]:
        """The hosts this process held, each with the seconds it was held until *now*
        (the end of a crawl: a hold that outlasts it counts up to then), the longest
        held first."""
        held = [(key, r.held_by(now), r) for key, r in self.records.items() if r.holds]
        return sorted(held, key=lambda item: -item[1])
