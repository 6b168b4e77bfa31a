"""The gate: the downloader middleware that starts a request only when its
politeness unit is ready, end to start, as the site sees it.

Placed after every middleware that may drop or answer a request without the network
(Scrapy's HTTP cache at 900; the add-on uses 940), so that its ``process_request`` is
the last word before the download: a unit with a floor gets one request at a time,
no earlier than the floor after the previous response from it ended (robots.txt
included), and no unit gets a request while it is held (it asked to slow down).  A
late start on a busy event loop can only lengthen the gap the site sees.

What waits, and where:

* the scheduler's queue (:mod:`._pqueue`) hands out a request of a ready unit when
  there is one, so that requests seldom wait here; when no unit is ready, it hands
  out the one ready soonest (marked :data:`META_EARLY`), which waits here, holding a
  place of ``CONCURRENT_REQUESTS`` that no other unit could use;
* a request that finds its unit not ready without having been handed out early
  (its floor was learnt from robots.txt after the queue let it go, or a hold began)
  is handed back to the scheduler, once, rather than hold a place while other units
  may be ready (:data:`META_REQUEUED`, stat ``crawldelay/requeued``);
* a request of a unit without a floor that has as many requests in progress as
  its concurrency (its download slot's: ``CONCURRENT_REQUESTS_PER_DOMAIN``, or
  ``CONCURRENT_REQUESTS_PER_IP`` when set, ``DOWNLOAD_SLOTS``) waits
  here for one to end, not in Scrapy's download slot past the gate, where a hold
  that the end brings (a 429) would not stop it: Scrapy's own queues hand a host's
  requests out beyond its concurrency;
* robots.txt fetches wait here: they come from the robots middleware, not the
  scheduler.  An expired robots.txt whose request would wait longer than a page may
  is not fetched yet: the robots middleware obeys the expired copy meanwhile, or,
  with none to obey, hands the page back (:meth:`CrawlDelayGate._robots_fetch_delay`).
  One that comes to wait that long while it waits (its unit held after the end it
  waited for, a 429; a floor learnt meanwhile; a redirect's next hop, due a floor
  after the hop before) is put off (:meth:`CrawlDelayGate._put_off_for`): its fetch
  ends undecided, the pages that waited for it go back to the scheduler, and the
  authority's next fetch goes on from that request.

Ends are seen in four public places, whichever comes first: Scrapy's
``response_downloaded`` and ``request_left_downloader`` signals (the download
ended; the first says with which response), and this middleware's own
``process_response`` and ``process_exception``, which every request that left the
scheduler passes on its way back (a request dropped by a middleware, answered from a
cache, redirected, retried): the queues learn there that a request they handed out
is done.
"""

from __future__ import annotations

import asyncio
from collections import deque
from contextlib import suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from ..._shared import META_ROBOTS, RobotsFetchPutOff, offers
from ...ledger import INFINITY
from ...robots import is_redirect
from ._politeness import politeness

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

#: Request.meta key: the queue handed the request out before its unit was ready (no
#: unit was): it waits in the gate.
META_EARLY = "crawldelay_early"
#: The schemes whose requests reach a site (others, ``data:`` and ``file:``, pass).
NETWORK_SCHEMES = frozenset({"http", "https", "ftp", "s3"})
#: Request.meta key: the gate handed the request back to the scheduler once already.
META_REQUEUED = "crawldelay_requeued"
#: Request.meta key: the names of the headers a request had when it was scheduled
#: (absent: none), so that a copy handed back carries those only.
META_OWN_HEADERS = "crawldelay_own_headers"
#: A page waits here at most this long (seconds): if its unit is still not about to
#: be ready (within :data:`LOOK_EVERY`), it goes back to the scheduler, which hands
#: it out again (Scrapy's own queue at once, the package's when its unit is ready).
#: So no request holds the downloader for a floor or a hold of minutes, and a stop
#: (SIGTERM, ``CLOSESPIDER_*``: Scrapy waits for the requests in its downloader) is
#: as prompt, whatever the floors and holds; with ``JOBDIR`` or a scrapy-redis queue,
#: the resumed crawl fetches what was handed back.
MOST_WAIT = 5.0
#: A waiting request looks this often (seconds) whether it has waited its most.
LOOK_EVERY = 1.0


class _HandBack(Exception):
    """A page waited its most: it goes back to the scheduler."""


class CrawlDelayGate:
    def __init__(self, crawler: Crawler) -> None:
        throttle = offers(crawler).throttle
        if throttle is None:  # CRAWLDELAY_ENABLED is off
            raise NotConfigured
        self.throttle = throttle
        self.politeness = politeness(crawler)
        self.politeness.tracking = True
        self._offers = offers(crawler)
        self._offers.on_robots_decided.append(self.politeness.decided)
        self._offers.robots_fetch_delay = self._robots_fetch_delay
        self.stats = crawler.stats
        self._started: dict[Request, tuple[str, bool]] = {}  # -> (unit key, fleet held)
        #: Those of them past every downloader middleware (Scrapy's
        #: ``request_reached_downloader``): only those may have reached their site; one
        #: a later middleware dropped (the budget's) or answered did not.
        self._downloading: set[Request] = set()
        # Requests waiting for their unit, in the order they came, by unit key.
        self._lines: dict[str, deque[asyncio.Future[None]]] = {}
        #: Authorities whose robots.txt fetch was put off: until when a fetch waits.
        self._put_off: dict[str, float] = {}
        throttle.gate_enabled = True
        crawler.signals.connect(self._scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self._downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self._reached, signal=signals.request_reached_downloader)
        crawler.signals.connect(self._left, signal=signals.request_left_downloader)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Any = None) -> Request | None:
        if urlparse_cached(request).scheme not in NETWORK_SCHEMES:  # data:, file:
            return None
        polite = self.politeness
        key = polite.unit(request)
        self.throttle.learn(key, request)
        meta = request.meta
        robots = meta.get(META_ROBOTS)
        wait = polite.ready_at(key, robots) - polite.now()
        if wait > 0 and not robots:  # about to wait here, or go back to the scheduler
            await self._drop_if_refused(request)
        waits_here = robots or meta.get(META_EARLY) or meta.get(META_REQUEUED) or polite.full(key)
        if wait > polite.requeue_after and not waits_here:
            return self._requeue(request)
        meta.pop(META_EARLY, None)  # not for the redirects and retries it may lead to
        try:
            fleet = await self._wait_for_unit(key, request, wait)
        except _HandBack:
            return self._requeue(request)
        finally:
            polite.early.discard(request)
        polite.started(key)
        self._started[request] = (key, fleet)
        return None

    async def _drop_if_refused(self, request: Request) -> None:
        """A request its budget will drop waits for nothing: dropped now."""
        if self._offers.budget_refusal is not None:
            refused = await self._offers.budget_refusal(request)
            if refused is not None:
                raise IgnoreRequest(refused)

    async def _wait_for_unit(self, key: str, request: Request, wait: float) -> bool:
        """Wait until *request* may start (robots.txt requests first, then the unit's
        line); True if the fleet's Redis holds the unit for it.  *wait*: how long the
        unit was not ready for when it came (its budget was asked if more than 0)."""
        polite = self.politeness
        robots = request.meta.get(META_ROBOTS)
        if robots:
            # Never in line behind the unit's pages, which may wait for this very
            # fetch's file (a robots.txt redirected on its own host): before them.
            with polite.robots_first(key):
                return await self._until_ready(key, request)
        if wait > 0 or key in self._lines or self.throttle.needs_fleet(key, request):
            return await self._take_turn(key, request, polite.now() + MOST_WAIT, wait > 0)
        return False

    async def _take_turn(
        self, key: str, request: Request, give_up: float, budget_read: bool
    ) -> bool:
        """Wait until unit *key* is ready and every request that came to wait for it
        before *request* has started (first come, first served); with a fleet, until
        its Redis holds the unit for this process too (then True).  Raise
        :class:`_HandBack` at *give_up* if the unit is not about to be ready."""
        line = self._lines.setdefault(key, deque())
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line.append(turn)
        if len(line) == 1:
            turn.set_result(None)
        try:
            while not turn.done():
                with suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(turn), LOOK_EVERY)
                self._hand_back_if_due(give_up, self.politeness.ready_at(key))
            return await self._until_ready(key, request, give_up, budget_read)
        finally:
            head = line[0] is turn
            line.remove(turn)
            if not line:
                del self._lines[key]
            elif head and not line[0].done():
                line[0].set_result(None)

    async def _until_ready(
        self,
        key: str,
        request: Request,
        give_up: float | None = None,
        budget_read: bool = True,
    ) -> bool:
        """Wait until unit *key* is ready for *request* (see :meth:`_until_unit_ready`)."""
        robots = request.meta.get(META_ROBOTS)
        with self.politeness.waiting(key):
            return await self._until_unit_ready(key, request, robots, give_up, budget_read)

    async def _until_unit_ready(
        self,
        key: str,
        request: Request,
        robots: str | None,
        give_up: float | None,
        budget_read: bool,
    ) -> bool:
        """Wait until unit *key* is ready here and, with a fleet, its Redis holds it
        for *request* (then True).  Unless *budget_read* (the budget was asked as the
        request came; a robots.txt request spends none), a page whose unit another
        process holds is dropped first if its budget is spent: it would wait for
        nothing."""
        polite = self.politeness
        while True:
            wait = polite.ready_at(key, robots) - polite.now()
            while wait > 0:
                put_off = self._put_off_for(key, robots) if robots else 0.0
                if put_off:
                    raise RobotsFetchPutOff(f"{key} would keep it waiting", put_off)
                await polite.wait(key, min(wait, LOOK_EVERY))
                self._hand_back_if_due(give_up, polite.ready_at(key, robots))
                wait = polite.ready_at(key, robots) - polite.now()
            # A request the shared queue's pop took holds its unit in the fleet's
            # Redis already, and a robots.txt fetch of such a unit (its copy expired)
            # shares that hold: the page waits for the file, the file must not wait
            # for the page.  The queue lets the hold go when the page ends.
            popped = polite.unit_fleet_hold(key) if robots else polite.fleet_hold(request)
            if popped is not None and self.throttle.floor(key) <= popped.floor:
                return False
            if not self.throttle.needs_fleet(key, request):
                return False
            # Its floor rose since the pop (robots.txt was read): the hold is asked
            # again with that floor.
            token = popped.token if popped is not None else None
            wait = await self.throttle.fleet_acquire(key, token)
            if wait and not budget_read:
                budget_read = True
                await self._drop_if_refused(request)
            if wait:
                # Redis says when to ask again, not when the unit is ready (another
                # process's request to it may last its lease): once *give_up* has
                # passed, a page goes back to the scheduler.
                if give_up is not None:
                    wait = min(wait, max(give_up - polite.now(), LOOK_EVERY))
                await polite.wait(key, wait)
                self._hand_back_if_due(give_up, INFINITY)
            elif polite.ready_at(key, robots) <= polite.now():
                return popped is None
            elif popped is None:  # something changed here while Redis answered
                self.throttle.fleet_release(key)

    def _hand_back_if_due(self, give_up: float | None, ready_at: float) -> None:
        """Raise :class:`_HandBack` once *give_up* has passed, unless the unit is about
        to be ready (at *ready_at*); robots.txt requests (no *give_up*) wait on."""
        now = self.politeness.now()
        if give_up is not None and now >= give_up and ready_at - now > LOOK_EVERY:
            self.stats.inc_value("crawldelay/handed_back")
            raise _HandBack

    def _robots_fetch_delay(self, authority: str) -> float:
        """0 if a robots.txt request of *authority* would wait here no longer than a
        page may (:data:`MOST_WAIT`), not counting its waits for events (a request of
        the unit on the wire, a robots.txt being read), which come without it; else
        :data:`MOST_WAIT`: the robots middleware obeys the authority's expired copy
        that long (with none, the page waits that long and goes back to the
        scheduler), then asks again.  Such a request could not be handed back (it
        comes from the robots middleware, not the scheduler), and a stop would wait
        for it.  The same while a fetch of it put off (:meth:`_put_off_for`) would be
        put off again."""
        polite = self.politeness
        key = polite.unit_of_host(urlsplit(authority).hostname or "")
        ready = polite.ready_at(key, authority, ends_now=True)
        put_off = self._put_off.get(authority, 0.0)
        if put_off - polite.now() <= MOST_WAIT:
            self._put_off.pop(authority, None)
        return MOST_WAIT if max(ready, put_off) - polite.now() > MOST_WAIT else 0.0

    def _put_off_for(self, key: str, authority: str) -> float:
        """How long a request of *authority*'s robots.txt fetch, waiting for unit
        *key*, is put off (:class:`RobotsFetchPutOff`); 0: it waits on.  Put off if
        it would wait longer than a page may, as it would not have been sent had its
        wait been known (see :meth:`_robots_fetch_delay`): the unit came to be held
        (the end it waited for was a 429), a floor was learnt meanwhile, or it is a
        redirect's next hop, due a floor after the hop before.  The fetch goes on
        from this request when its next fetch starts, not from its first (which
        would meet the same wait again); that waits until *key* is about to be
        ready, so a hop to a held unit (``www.`` redirected to a held apex) has the
        fetch started once more, near the hold's end, not at every look."""
        polite = self.politeness
        wait = polite.ready_at(key, authority, ends_now=True) - polite.now()
        if wait <= MOST_WAIT:
            return 0.0
        self._put_off[authority] = polite.now() + wait
        self.stats.inc_value("crawldelay/robots_put_off")
        return wait

    def _scheduled(self, request: Request, spider: Any = None) -> None:
        if request.headers:
            request.meta[META_OWN_HEADERS] = [name.decode("latin-1") for name in request.headers]

    def _requeue(self, request: Request) -> Request:
        """A copy of *request* for the scheduler, which hands it out when its unit is
        ready; *request* itself is done.  The copy has the headers the request was
        scheduled with, not those this process's middlewares added (its
        ``User-Agent``, ``Cookie``, ``Authorization``, ``Proxy-Authorization``): in
        a shared queue another process may send it, with ``JOBDIR`` another crawl."""
        self.politeness.finished(request, reached=False)
        self.stats.inc_value("crawldelay/requeued")
        meta = {**request.meta, META_REQUEUED: True}
        own = {name.encode("latin-1") for name in meta.get(META_OWN_HEADERS, ())}
        headers = {name: values for name, values in request.headers.items() if name in own}
        return request.replace(dont_filter=True, meta=meta, headers=headers)

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        self._end(request)
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        self._end(request)

    def _reached(self, request: Request, spider: Any = None) -> None:
        if request in self._started:
            self._downloading.add(request)

    def _downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        self._end(request, response)

    def _left(self, request: Request, spider: Any = None) -> None:
        self._end(request)

    def _end(self, request: Request, response: Response | None = None) -> None:
        started = self._started.pop(request, None)
        reached = request in self._downloading
        self._downloading.discard(request)
        self.politeness.finished(request, reached=reached)
        if started is None:
            return
        key, fleet = started
        robots_of = request.meta.get(META_ROBOTS)
        if robots_of:
            redirected = response is not None and is_redirect(response.status)
            self.politeness.deciding(key, robots_of, redirected)
        self.politeness.ended(key, reached)
        if fleet:
            self.throttle.fleet_release(key, reached)
