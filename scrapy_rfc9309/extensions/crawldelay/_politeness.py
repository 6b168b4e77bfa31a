"""When each politeness unit may start its next request, for one crawl.

One :class:`Politeness` per crawler, shared by the throttle (which knows each unit's
floor and holds), the gate (:mod:`._gate`, which starts requests and sees them end)
and the scheduler's queues (which hand out the request of the unit that is ready
soonest).  They meet here, never in each other's modules.

A unit with a floor (a Crawl-delay, a configured delay, a backoff) has one request at
a time in progress, and is ready ``floor`` after the last one ended (end to start, as
the site sees it).  A unit without one is ready whenever it is not held.  Times are
``time.monotonic()`` seconds.

The states a unit passes through, and what ends each (:meth:`Politeness.ready_at`
reads them in this order; every wait ends on a time or on an event that does not
need the waiting request):

=====================  ==============================  ==========================
state                  what may start                  what ends it
=====================  ==============================  ==========================
robots.txt not         the package's queue starts      the fetch starts (the
fetched                its read and keeps the          middleware holds one per
                       unit's requests; with another   authority)
                       queue, its first request,
                       which fetches it
robots.txt being       nothing else of the unit,       the response ends, within
fetched (in progress)  a robots.txt request first      its timeout
robots.txt being read  robots.txt requests: the        the middleware decides,
                       fetch's own hops, and other     when the chain ends, or is
                       fetches whose reading began     put off (each hop bounded
                       later                           by its timeout and 5 s)
held                   nothing                         the hold's end
in progress (floored,  nothing                         a response ends
or as many requests
as its concurrency)
spaced                 nothing                         the floor after the last
                                                       end
ready                  anything                        --
=====================  ==============================  ==========================

A robots.txt request waits only for time, for downloads to end, and for files whose
reading began before its own fetch's: never for its own file, which may need it (a
robots.txt redirected on its own host, as ``http://`` to ``https://`` is), and not
for a hold or a floor longer than a page may wait (the gate puts it off, and the
fetch goes on from that request later).  So every decision comes, and every wait
for one ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from scrapy.utils.httpobj import urlparse_cached

from ..._settings import configured_concurrency
from ...ledger import INFINITY, LocalLedger
from ._units import unit_of_host

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

#: How many unit keys are remembered as having had a request done (their floor is
#: known); past this many, the least recently done are forgotten and go one request
#: at a time again until their next one is done.
MAX_DONE_KEYS = 100_000


class PopHold(NamedTuple):
    """The hold a shared queue's pop took of a request's unit in Redis."""

    token: str  #: what the request's end names to let the unit go
    floor: float  #: the floor the unit was held with
    fleet: bool  #: in the fleet's ledger too (the spacing's Redis): no acquisition needed


@dataclass
class _Reading:
    """A robots.txt being read: its order among readings, since when, its units, and
    whether its last response was a redirect (the fetch goes on)."""

    order: int
    since: float
    units: list[str] = field(default_factory=list)
    redirected: bool = False


class Limits(Protocol):
    """What a unit's sites and settings ask for (the throttle knows it)."""

    #: The largest floor any unit may get (seconds): ends older than that are forgotten.
    max_floor: float

    def floor(self, key: str) -> float:
        """The least time from the end of one request of unit *key* to the start of
        the next (seconds)."""

    def held_until(self, key: str) -> float:
        """Until when unit *key* is held (it asked to slow down), on the monotonic clock."""


class NoLimits:
    """No unit has a floor or a hold (the throttle is off)."""

    max_floor = 0.0

    def floor(self, key: str) -> float:
        return 0.0

    def held_until(self, key: str) -> float:
        return 0.0


class Politeness:
    """The readiness of every politeness unit of one crawl.

    *unit_of_host* gives a host's unit key, *concurrency* the most requests a unit
    without a floor may have in progress; *limits* (the throttle's, given with
    :meth:`limit_by`) each unit's floor and hold.
    """

    def __init__(
        self, unit_of_host: Callable[[str], str], concurrency: Callable[[str], int] = lambda key: 1
    ) -> None:
        self.unit_of_host = unit_of_host
        self.concurrency = concurrency
        self.limits: Limits = NoLimits()
        #: A request handed out as ready that must wait longer than this (seconds) is
        #: handed back to the scheduler rather than hold a place; a queue whose push
        #: and pop block on a network (a fleet's) raises it: waiting is cheaper there.
        self.requeue_after = 0.0
        self.now: Callable[[], float] = time.monotonic
        #: Each unit's requests in progress and last end, and the rule.
        self.ledger = LocalLedger(lambda: self.now())
        #: Set by the gate: it sees every request end, so the queues may count the
        #: requests they handed out.  Without it (the throttle off, a queue named by
        #: hand), they count none: one that never ended would hold its unit for good.
        self.tracking = False
        # robots.txt being read (a fetch's response ended, no decision yet): by
        # authority, and by unit the authorities with their order.
        self._reading: dict[str, _Reading] = {}
        self._reading_in: dict[str, dict[str, int]] = {}  # unit -> authority -> order
        self._order = itertools.count()
        self._robots_waiting: dict[str, int] = {}  # robots.txt requests waiting to start
        self._waiters: dict[str, asyncio.Future[None]] = {}
        # Requests waiting in the gate for their turn: when each began, by unit.
        self._waits: dict[str, list[float]] = {}
        #: The units each queue holds requests of (for the live view).
        self.queued_units: list[Callable[[], Iterable[str]]] = []
        #: Requests a queue handed out before their unit was ready, until they start
        #: (or are done with): each holds a place of the downloader meanwhile.
        self.early: set[Request] = set()
        # Requests a queue handed out, until they are done: unit key by request.
        self._released: dict[Request, str] = {}
        self.out: dict[str, int] = {}  # unit key -> released requests not yet done
        #: Requests whose unit the shared queue's pop holds in Redis, until they are
        #: done.
        self.held_by_pop: dict[Request, PopHold] = {}
        self.done: OrderedDict[str, None] = OrderedDict()
        #: Called with a unit key when one of its requests is done, or ended.
        self.on_done: list[Callable[[str], None]] = []
        #: Called with each released request when it is done, its unit key, whether
        #: it reached the site, and its pop's hold.
        self.on_finished: list[Callable[[Request, str, bool, PopHold | None], None]] = []

    def limit_by(self, limits: Limits) -> None:
        """From now on, floors and holds are those of *limits*."""
        self.limits = limits

    def floor(self, key: str) -> float:
        return self.limits.floor(key)

    def held_until(self, key: str) -> float:
        return self.limits.held_until(key)

    def unit(self, request: Request) -> str:
        """The unit key of *request*."""
        return self.unit_of_host(urlparse_cached(request).hostname or "")

    # -- readiness ---------------------------------------------------------

    def ready_at(self, key: str, robots: str | None = None, ends_now: bool = False) -> float:
        """The earliest time unit *key* may start a request: ``inf`` until an event
        (a response ends, a robots.txt being read is decided); see the module's
        table.  *robots*: the authority whose robots.txt the request fetches (a hop
        of its redirects included).  *ends_now*: as if those events came now."""
        if robots is None:
            waits = bool(self._reading_in.get(key) or self._robots_waiting.get(key))
        else:
            waits = self._reads_before(key, robots)
        if waits and not ends_now:
            return INFINITY
        # A robots.txt request starts alone: the file may give the unit a floor.
        concurrency = self.concurrency(key) if robots is None else 1
        return self.ledger.ready_at(
            key, self.floor(key), self.held_until(key), concurrency, ends_now
        )

    def full(self, key: str) -> bool:
        """Whether unit *key*, without a floor, has as many requests in progress as its
        concurrency: the next waits in the gate for one to end, not in Scrapy's
        download slot (which sends all it holds at once, and where a 429's hold would
        not stop it)."""
        return not self.floor(key) and self.ledger.full(key, 0.0, self.concurrency(key))

    def _reads_before(self, key: str, authority: str) -> bool:
        """Whether a request of *authority*'s robots.txt fetch waits for a robots.txt
        being read in unit *key*: for one whose last response was the file (its
        decision needs no request), and for a redirect whose reading began before
        this fetch's did (any, if this fetch's has not).  So a fetch never waits for
        one that waits for it: a robots.txt redirected on its own host waits for
        nothing of its own, and ``a.com`` -> ``b.com`` while ``b.com`` -> ``a.com``
        cannot wait in a circle."""
        reading = self._reading_in.get(key)
        if not reading:
            return False
        mine = self._reading[authority].order if authority in self._reading else None
        for other in reading:
            if other != authority:
                theirs = self._reading[other]
                if not theirs.redirected or mine is None or theirs.order < mine:
                    return True
        return False

    def state(self, key: str) -> str:
        """Unit *key*'s state, in the words of the module's table."""
        if self._reading_in.get(key):
            return "robots.txt being read"
        now = self.now()
        if self.held_until(key) > now:
            return "held"
        if self.ledger.full(key, self.floor(key), self.concurrency(key)):
            return "in progress"
        last = self.ledger.last_end(key)
        if last is not None and last + self.floor(key) > now:
            return "spaced"
        return "ready"

    def units_with_work(self) -> set[str]:
        """The units with requests waiting here: in the queues, or in the gate."""
        units = set(self._waits)
        for queued in self.queued_units:
            units.update(queued())
        return units

    def reading_since(self) -> dict[str, float]:
        """Since when each robots.txt being read has waited for its decision, by
        authority."""
        return {authority: reading.since for authority, reading in self._reading.items()}

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

    @contextlib.contextmanager
    def robots_first(self, key: str) -> Iterator[None]:
        """While a robots.txt request of unit *key* waits to start, no other request
        of the unit starts: the file may give the unit a floor."""
        self._robots_waiting[key] = self._robots_waiting.get(key, 0) + 1
        try:
            yield
        finally:
            left = self._robots_waiting[key] - 1
            if left:
                self._robots_waiting[key] = left
            else:
                del self._robots_waiting[key]

    @contextlib.contextmanager
    def waiting(self, key: str) -> Iterator[None]:
        """While a request of unit *key* waits in the gate for its turn: the unit
        has work here (the live view and the stall watch see it) until the last of
        its waiting requests stops waiting."""
        began = self.now()
        waits = self._waits.setdefault(key, [])
        waits.append(began)
        try:
            yield
        finally:
            waits.remove(began)
            if not waits:
                del self._waits[key]

    @property
    def waiting_since(self) -> dict[str, float]:
        """Since when each unit's longest waiting request has waited in the gate for
        its turn (see :meth:`waiting`)."""
        return {key: waits[0] for key, waits in self._waits.items()}

    def started(self, key: str) -> None:
        self.ledger.started(key)

    def ended(self, key: str, reached: bool = True) -> None:
        """A request of unit *key* that :meth:`started` ended now (*reached*: the site
        saw it; if not, the unit's floor does not count from now)."""
        self.ledger.ended(key, self.limits.max_floor, reached)
        self.changed(key)
        for done in self.on_done:
            done(key)

    def deciding(self, key: str, authority: str, redirected: bool) -> None:
        """A request of *authority*'s robots.txt fetch, of unit *key*, ended (with a
        redirect: *redirected*): until the file is read (:meth:`decided`), the unit's
        floor is not known, and no request of it starts but robots.txt requests (see
        :meth:`_reads_before`)."""
        reading = self._reading.get(authority)
        if reading is None:
            reading = self._reading[authority] = _Reading(next(self._order), self.now())
        reading.units.append(key)
        reading.redirected = redirected
        self._reading_in.setdefault(key, {})[authority] = reading.order

    def decided(self, authority: str, entry: object = None) -> None:
        """*authority*'s robots.txt fetch is over: its units go on."""
        reading = self._reading.pop(authority, None)
        if reading is None:
            return
        for key in dict.fromkeys(reading.units):
            in_unit = self._reading_in[key]
            del in_unit[authority]
            if not in_unit:
                del self._reading_in[key]
            self.changed(key)
            for done in self.on_done:
                done(key)

    # -- the queues' requests ------------------------------------------------

    def released(self, request: Request, key: str, hold: PopHold | None = None) -> None:
        """A queue handed *request* (of unit *key*) out; *hold*: the one its pop took."""
        if not self.tracking:
            return
        self._released[request] = key
        self.out[key] = self.out.get(key, 0) + 1
        if hold is not None:
            self.held_by_pop[request] = hold

    def fleet_hold(self, request: Request) -> PopHold | None:
        """The hold the shared queue's pop took of *request*'s unit in the fleet's
        ledger, if any."""
        hold = self.held_by_pop.get(request)
        return hold if hold is not None and hold.fleet else None

    def unit_fleet_hold(self, key: str) -> PopHold | None:
        """A hold the shared queue's pop took of unit *key* in the fleet's ledger for
        a request of this process, if any."""
        for request, hold in self.held_by_pop.items():
            if hold.fleet and self._released.get(request) == key:
                return hold
        return None

    def finished(self, request: Request, reached: bool) -> None:
        """*request* is done with: downloaded (*reached*: the site saw it), or dropped,
        answered without the network, handed back to the scheduler; nothing if no
        queue handed it out."""
        self.early.discard(request)
        key = self._released.pop(request, None)
        if key is None:
            return
        hold = self.held_by_pop.pop(request, None)
        for finished in self.on_finished:
            finished(request, key, reached, hold)
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
    """The one :class:`Politeness` of *crawler* (its unit from ``CRAWLDELAY_UNIT``, a
    unit's concurrency as its download slot's, see :func:`concurrency`)."""
    found = _POLITENESS.get(crawler)
    if found is None:
        settings = crawler.settings
        found = _POLITENESS[crawler] = Politeness(unit_of_host(settings), concurrency(settings))
    return found


def concurrency(settings: BaseSettings) -> Callable[[str], int]:
    """The most requests a unit without a floor may have in progress: its
    ``DOWNLOAD_SLOTS`` concurrency, else ``CONCURRENT_REQUESTS_PER_IP`` if set,
    else ``CONCURRENT_REQUESTS_PER_DOMAIN``, as Scrapy's slots have it; with
    AutoThrottle on, at most ``AUTOTHROTTLE_TARGET_CONCURRENCY`` rounded up.
    AutoThrottle's delay keeps the requests past the gate waiting in Scrapy's
    download slot, where a hold (a 429 answered meanwhile) would not stop them: at
    its default target, one request at a time, none waits there."""
    default, per_unit = configured_concurrency(settings)
    if not settings.getbool("AUTOTHROTTLE_ENABLED"):
        return lambda key: per_unit.get(key, default or 1)
    target = max(1, math.ceil(settings.getfloat("AUTOTHROTTLE_TARGET_CONCURRENCY")))
    return lambda key: min(per_unit.get(key, default or 1), target)
