"""The politeness ledger: when a unit may start its next request, behind one
interface (:class:`Ledger`) with two backends, in one process (:class:`LocalLedger`,
which the Crawl-delay throttle's ``Politeness`` keeps for its crawl) and in Redis
for a fleet (:class:`scrapy_rfc9309.fleet.spacing.FleetSpacing`, on
``fleet/ledger.lua``).  One contract test suite runs against both
(``tests/core/test_ledger_contract.py``).

The rule, in both: a unit starts no request before its hold ends, none while a
request holds it (until that one ends, or its lease does), and none before its floor
has passed since its last request ended.  Pure Python: no Scrapy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

INFINITY = float("inf")
#: While another request holds a unit, ask again after its floor, and no sooner than
#: this (seconds): a unit with no floor yet is not polled endlessly.
POLL_MIN = 0.05
#: The last ends are swept every this many ends: those whose largest possible floor
#: has passed are forgotten (a broad crawl keeps one per recently used unit).
SWEEP_EVERY = 1000


class Ledger(Protocol):
    """When each unit may start: ``await ledger.acquire(unit, floor, lease, token)``
    -> 0 (start now: the unit is held for *token*, at most *lease* seconds) or the
    seconds to wait before asking again; ``await ledger.release(unit, floor, token)``
    once that request ended (``reached=False``: without reaching the site)."""

    async def acquire(self, unit: str, floor: float, lease: float, token: str = "") -> float:
        """Hold *unit* for *token* if it may start now (0), else the seconds to wait
        before asking again.  The floor is the largest asked for the unit."""

    async def release(self, unit: str, floor: float, token: str = "", reached: bool = True) -> None:
        """The request that acquired *unit* with *token* ended now ('': whichever);
        one the unit is no longer held for (its lease ended) changes nothing.  One
        that did not reach the site (a middleware dropped it, *reached* false) leaves
        the unit's last end as it was: the next request waits no floor for it."""

    async def hold(self, unit: str, seconds: float) -> None:
        """No request of *unit* starts for *seconds*; a shorter hold shortens none."""

    async def holds(self) -> list[tuple[str, float]]:
        """The units held now, each with the seconds left."""


@dataclass
class _Acquired:
    token: str | None  # None: released, never acquired
    until: float  # the lease's end, or the release


class LocalLedger(Ledger):
    """The ledger of one process, on *now* (``time.monotonic``).  The gate tells it
    the requests of each unit as they start and end (:meth:`started`,
    :meth:`ended`), and :meth:`ready_at` applies the rule with the unit's floor and
    hold as the crawl knows them now.  The :class:`Ledger` methods keep the same
    records, with the leases, tokens, floors and holds they are given."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self._in_progress: dict[str, int] = {}  # unit -> requests started, not ended
        self._last_end: dict[str, float] = {}
        self._ends = 0
        self._acquired: dict[str, _Acquired] = {}
        self._floors: dict[str, float] = {}  # the largest asked through acquire
        self._holds: dict[str, float] = {}

    def ready_at(
        self,
        unit: str,
        floor: float,
        held_until: float = 0.0,
        concurrency: int = 1,
        ends_now: bool = False,
    ) -> float:
        """The earliest time *unit* may start a request (``inf``: when one in
        progress ends; with *ends_now*, as if they all ended now), if its floor is
        *floor* and it is held until *held_until*: with a floor, one request at a
        time, end to start; without one, up to *concurrency* at a time."""
        last = self._last_end.get(unit)
        if self.full(unit, floor, concurrency):
            if not ends_now:
                return INFINITY
            last = self.now()
        return max(held_until, last + floor if last is not None and floor else 0.0)

    def full(self, unit: str, floor: float, concurrency: int = 1) -> bool:
        """Whether *unit* has as many requests in progress as it may: one with a
        floor, *concurrency* without."""
        return self.running(unit) >= (1 if floor else concurrency)

    def running(self, unit: str) -> int:
        """The requests of *unit* started and not ended."""
        return self._in_progress.get(unit, 0)

    def last_end(self, unit: str) -> float | None:
        return self._last_end.get(unit)

    def started(self, unit: str) -> None:
        self._in_progress[unit] = self._in_progress.get(unit, 0) + 1

    def ended(self, unit: str, max_floor: float = INFINITY, reached: bool = True) -> None:
        """A request of *unit* that :meth:`started` ended now (without reaching the
        site: *reached* false, the last end stays); ends older than *max_floor* (the
        largest floor any unit may have) are forgotten now and then."""
        left = self._in_progress.get(unit, 0) - 1
        if left > 0:
            self._in_progress[unit] = left
        else:
            self._in_progress.pop(unit, None)
        if not reached:
            return
        now = self.now()
        self._last_end[unit] = now
        self._ends += 1
        if self._ends % SWEEP_EVERY == 0:
            horizon = now - max_floor
            for key in [key for key, end in self._last_end.items() if end < horizon]:
                del self._last_end[key]

    # -- the Ledger interface -------------------------------------------------

    async def acquire(self, unit: str, floor: float, lease: float, token: str = "") -> float:
        now = self.now()
        floor = self._floors[unit] = max(floor, self._floors.get(unit, 0.0))
        hold = self._holds.get(unit, 0.0)
        if hold > now:
            return hold - now
        held = self._acquired.get(unit)
        if held is not None and held.until > now and not (token and held.token == token):
            # Held by another request: ask again after the floor (a poll at least),
            # or when its lease ends if sooner.
            return max(min(held.until - now, max(floor, POLL_MIN)), 0.001)
        wait = self.ready_at(unit, floor) - now
        if wait > 0:
            return wait
        self._acquired[unit] = _Acquired(token, now + lease)
        return 0.0

    async def release(self, unit: str, floor: float, token: str = "", reached: bool = True) -> None:
        held = self._acquired.get(unit)
        if held is not None and held.token is not None and token and held.token != token:
            return
        now = self.now()
        self._acquired[unit] = _Acquired(held.token if held is not None else None, now)
        self._floors[unit] = max(floor, self._floors.get(unit, 0.0))
        if reached:
            self._last_end[unit] = now

    async def hold(self, unit: str, seconds: float) -> None:
        self._holds[unit] = max(self._holds.get(unit, 0.0), self.now() + seconds)

    async def holds(self) -> list[tuple[str, float]]:
        now = self.now()
        self._holds = {unit: until for unit, until in self._holds.items() if until > now}
        return [(unit, until - now) for unit, until in self._holds.items()]
