"""When each politeness unit may start its next request, for one crawl.

One :class:`Politeness` per crawler, shared by the throttle (which knows each unit's
floor and holds), the gate (:mod:`._gate`, which starts requests and sees them end)
and the scheduler's queues (which hand out the request of the unit that is ready
soonest).  They meet here, never in each other's modules.

A unit with a floor (a Crawl-delay, a configured delay, a backoff) has one request at
a time in progress, and is ready ``floor`` after the last one ended (end to start, as
the site sees it).  A unit without one is ready whenever it is not held.  Times are
``time.monotonic()`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from scrapy.utils.httpobj import urlparse_cached

from ._units import unit_of_host

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

INFINITY = float("inf")

#: How many unit keys are remembered as having had a request done (their floor is
#: known); past this many, the least recently done are forgotten and go one request
#: at a time again until their next one is done.
MAX_DONE_KEYS = 100_000
#: The last ends are swept every this many ends: those whose largest possible floor
#: has passed are forgotten (a broad crawl keeps one per recently used unit).
SWEEP_EVERY = 1000


def _no_floor(key: str) -> float:
    return 0.0


def _never_held(key: str) -> float:
    return 0.0


class Politeness:
    """The readiness of every politeness unit of one crawl.

    *unit_of_host* gives a host's unit key; the throttle sets :attr:`floor` and
    :attr:`held_until` (without it, no unit has either) and :attr:`max_floor` (the
    largest floor any unit may get: ends older than that are forgotten).
    """

    def __init__(self, unit_of_host: Callable[[str], str]) -> None:
        self.unit_of_host = unit_of_host
        self.floor: Callable[[str], float] = _no_floor
        self.held_until: Callable[[str], float] = _never_held
        self.max_floor = 0.0
        #: A request handed out as ready that must wait longer than this (seconds) is
        #: handed back to the scheduler rather than hold a place; a queue whose push
        #: and pop block on a network (a fleet's) raises it: waiting is cheaper there.
        self.requeue_after = 0.0
        self.now: Callable[[], float] = time.monotonic
        #: Set by the gate: it sees every request end, so the queues may count the
        #: requests they handed out.  Without it (the throttle off, a queue named by
        #: hand), they count none: one that never ended would hold its unit for good.
        self.tracking = False
        self._in_progress: dict[str, int] = {}  # unit key -> requests started, not ended
        # robots.txt fetches whose requests ended but whose file is not read yet: by
        # authority, their requests' units; and how many such a unit waits for.
        self._deciding: dict[str, list[str]] = {}
        self._undecided: dict[str, int] = {}
        self._last_end: dict[str, float] = {}
        self._ends = 0
        self._waiters: dict[str, asyncio.Future[None]] = {}
        # Requests a queue handed out, until they are done: unit key by request.
        self._released: dict[Request, str] = {}
        self.out: dict[str, int] = {}  # unit key -> released requests not yet done
        self.done: OrderedDict[str, None] = OrderedDict()
        #: Called with a unit key when one of its requests is done, or ended.
        self.on_done: list[Callable[[str], None]] = []
        #: Called with each released request when it is done, its unit key, and
        #: whether it reached the site.
        self.on_finished: list[Callable[[Request, str, bool], None]] = []

    def unit(self, request: Request) -> str:
        """The unit key of *request*."""
        return self.unit_of_host(urlparse_cached(request).hostname or "")

    # -- readiness ---------------------------------------------------------

    def ready_at(self, key: str, one_at_a_time: bool = False) -> float:
        """The earliest time unit *key* may start a request (``inf`` while a floored
        unit has one in progress).  *one_at_a_time*: for a request that waits for the
        unit's other requests even while it has no floor (a robots.txt fetch: the
        file may give the unit one)."""
        held = self.held_until(key)
        floor = self.floor(key)
        if not floor and not one_at_a_time:
            return held if not self._undecided.get(key) else INFINITY
        if self._in_progress.get(key) or self._undecided.get(key):
            return INFINITY
        last = self._last_end.get(key)
        return max(held, last + floor if last is not None else 0.0)

    async def wait(self, key: str, seconds: float) -> None:
        """Wait *seconds*, or less if something about unit *key* changes."""
        waiter = self._waiters.get(key)
        if waiter is None or waiter.done():
            waiter = self._waiters[key] = asyncio.get_running_loop().create_future()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(waiter), min(seconds, 3600.0))

    def changed(self, key: str) -> None:
        """Something about unit *key* changed (its floor, a hold, an end): its waiting
        requests look again."""
        waiter = self._waiters.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the gate's requests -----------------------------------------------

    def started(self, key: str) -> None:
        self._in_progress[key] = self._in_progress.get(key, 0) + 1

    def ended(self, key: str) -> None:
        """A request of unit *key* that :meth:`started` ended now."""
        left = self._in_progress.get(key, 0) - 1
        if left > 0:
            self._in_progress[key] = left
        else:
            self._in_progress.pop(key, None)
        now = self.now()
        self._last_end[key] = now
        self._ends += 1
        if self._ends % SWEEP_EVERY == 0:
            self._sweep(now)
        self.changed(key)
        for done in self.on_done:
            done(key)

    def deciding(self, key: str, authority: str) -> None:
        """A request of *authority*'s robots.txt fetch, of unit *key*, ended: until
        the file is read (:meth:`decided`), the unit's floor is not known, and no
        request of it starts (another host of the unit, another scheme or port)."""
        self._deciding.setdefault(authority, []).append(key)
        self._undecided[key] = self._undecided.get(key, 0) + 1

    def decided(self, authority: str, entry: object = None) -> None:
        """*authority*'s robots.txt fetch is over: its units go on."""
        for key in self._deciding.pop(authority, ()):
            left = self._undecided[key] - 1
            if left:
                self._undecided[key] = left
            else:
                del self._undecided[key]
            self.changed(key)
            for done in self.on_done:
                done(key)

    def _sweep(self, now: float) -> None:
        horizon = now - self.max_floor
        for key in [key for key, end in self._last_end.items() if end < horizon]:
            del self._last_end[key]

    # -- the queues' requests ------------------------------------------------

    def released(self, request: Request, key: str) -> None:
        """A queue handed *request* (of unit *key*) out."""
        if not self.tracking:
            return
        self._released[request] = key
        self.out[key] = self.out.get(key, 0) + 1

    def finished(self, request: Request, reached: bool) -> None:
        """*request* is done with: downloaded (*reached*: the site saw it), or dropped,
        answered without the network, handed back to the scheduler; nothing if no
        queue handed it out."""
        key = self._released.pop(request, None)
        if key is None:
            return
        for finished in self.on_finished:
            finished(request, key, reached)
        left = self.out[key] - 1
        if left:
            self.out[key] = left
        else:
            del self.out[key]
        self.done[key] = None
        self.done.move_to_end(key)
        if len(self.done) > MAX_DONE_KEYS:
            self.done.popitem(last=False)
        for done in self.on_done:
            done(key)


_POLITENESS: weakref.WeakKeyDictionary[Crawler, Politeness] = weakref.WeakKeyDictionary()


def politeness(crawler: Crawler) -> Politeness:
    """The one :class:`Politeness` of *crawler* (its unit from ``CRAWLDELAY_UNIT``)."""
    found = _POLITENESS.get(crawler)
    if found is None:
        found = _POLITENESS[crawler] = Politeness(unit_of_host(crawler.settings))
    return found
