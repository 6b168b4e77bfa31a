"""Extension: every download slot spaced by at least
``max(configured delay, the budget policy's delay, robots.txt Crawl-delay / Request-rate)``.

The configured delay is ``DOWNLOAD_DELAY`` or the slot's ``DOWNLOAD_SLOTS`` delay;
the policy's is its ``delay`` (or ``1 / qps``) for the host; the robots.txt delay is
that of the group applying to the crawler's product token, learnt from Scrapy's
``robots_parsed`` signal (sent by this package's robots middleware and by Scrapy's
built-in one), capped at ``CRAWLDELAY_MAX_DELAY``.

The floor is kept end to start (see :mod:`._gate`): a floored host gets its next
request, robots.txt included, no earlier than the floor after the previous response
from it completed, whatever the jitter or AutoThrottle do to the slot's own delay
(see :mod:`._slots`), for requests already queued when a robots.txt arrives, and for
a slot that Scrapy collected while idle and made again.  With ``FLEET_REDIS_URL``,
the same holds across the fleet's processes (see :mod:`._fleet`).  The scheduler's
queue (:mod:`scrapy_rfc9309.pqueues`) releases a request only when its host is ready, so that
requests seldom wait in the downloader.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import AsyncioLoopingCall, create_looping_call
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached

from ..._settings import (
    CrawlDelaySettings,
    SettingError,
    redacted_url,
    report_configuration_errors_in_one_line,
)
from ..._shared import META_ROBOTS, ROBOTS_PARSED, authority_of, crawler_token
from ...downloadermiddlewares.budget._setup import load_policy
from ...robotparser import RobotParser
from . import _slots
from ._backoff import Backoff
from ._fleet import FleetGates
from ._gate import EndToStartGate
from ._hostclock import host_clock
from ._lastseen import LastSeen

if TYPE_CHECKING:
    from scrapy.core.downloader import Slot
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser as ScrapyRobotParser
    from twisted.internet.task import LoopingCall
    from typing_extensions import Self

    from ...budget.policy import BudgetPolicy

logger = logging.getLogger(__name__)


class CrawlDelayThrottle:
    def __init__(self, crawler: Crawler) -> None:
        report_configuration_errors_in_one_line()
        config = CrawlDelaySettings.from_settings(crawler.settings)
        if config is None:
            raise NotConfigured
        try:
            _slots.check_slots()
        except _slots.SeamError as exc:
            raise SettingError(f"CRAWLDELAY_ENABLED: {exc}") from exc
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_delay = config.max_delay
        fleet = config.fleet_url
        self._fleet = self._fleet_gates(crawler, fleet, config.lease)
        backoff = config.backoff
        self._backoff = (
            Backoff(crawler, backoff, self._fleet, self._hold_ended) if backoff else None
        )
        self._gate = EndToStartGate(
            self.floor, self._fleet, self._backoff.held if self._backoff else None
        )
        self.max_waiting = config.max_waiting
        self._concurrency = crawler.settings.getint("CONCURRENT_REQUESTS")
        self._in_slots = 0  # requests that reached the downloader's slots, not yet left
        self.policy: BudgetPolicy | None = None
        settings = crawler.settings
        if settings.get("DOMAINBUDGET_POLICY_FILE") or settings.get("DOMAINBUDGET_POLICY"):
            self.policy = load_policy(settings)
        self._default_delay, self._slot_delays = config.default_delay, config.slot_delays
        self._user_agent, self._default_user_agent = config.user_agent, config.default_user_agent
        # Only non-zero delays are kept: a broad crawl of polite sites stores nothing.
        self._robots_delays: dict[str, float] = {}  # authority -> capped robots.txt delay
        self._site_delays: dict[str, dict[str, float]] = {}  # slot key -> authority -> delay
        self._slots_of: dict[str, set[str]] = {}  # authority -> slot keys it was seen in
        self._last_seen = LastSeen(self.floor, _slots.slot_clock)
        clock = host_clock(crawler)
        clock.floor, clock.last_seen, clock.now = self.floor, self._last_seen.get, _slots.slot_clock
        if self._backoff is not None:
            clock.held_until = self._backoff.held_until
        self._poll: AsyncioLoopingCall | LoopingCall | None = None
        self._holds_poll: AsyncioLoopingCall | LoopingCall | None = None
        logger.info(
            "Crawl-delay throttle: requests to a host at least max(DOWNLOAD_DELAY = %.6g s, "
            "robots.txt Crawl-delay up to %.6g s, the budget policy's delay) after the "
            "previous one ended; %s",
            self._default_delay,
            self.max_delay,
            f"spacing shared through the fleet Redis {redacted_url(fleet)}"
            if fleet
            else "spacing kept in this process",
        )
        crawler.signals.connect(self._robots_parsed, signal=ROBOTS_PARSED)
        crawler.signals.connect(self._reached, signal=signals.request_reached_downloader)
        crawler.signals.connect(self._left, signal=signals.request_left_downloader)
        crawler.signals.connect(self._engine_started, signal=signals.engine_started)
        if self._backoff is not None:
            crawler.signals.connect(self._downloaded, signal=signals.response_downloaded)
            crawler.signals.connect(self._backoff.close, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @staticmethod
    def _fleet_gates(crawler: Crawler, url: str | None, lease: float) -> FleetGates | None:
        if not url:
            return None
        gates = FleetGates(crawler, url, lease)
        crawler.signals.connect(gates.close, signal=signals.spider_closed)
        return gates

    def floor(self, key: str) -> float:
        """The least time from the end of one request of slot *key* to the start of
        the next, in seconds."""
        configured = self._slot_delays.get(key, self._default_delay)
        backoff = self._backoff.delay(key) if self._backoff is not None else 0.0
        return max(configured, backoff, *self._site_delays.get(key, {}).values())

    # -- signals ---------------------------------------------------------

    def _robots_parsed(self, robotparser: ScrapyRobotParser, request: Request) -> None:
        token = crawler_token(self._user_agent, request, self._default_user_agent)
        if isinstance(robotparser, RobotParser):
            delay = robotparser.delay(token)  # Crawl-delay and Request-rate
        else:
            delay = robotparser.crawl_delay(token)
        authority = authority_of(request)
        if delay is not None and delay > self.max_delay:
            self.stats.inc_value("crawldelay/capped")
            logger.info(
                "robots.txt of %s asks for %.6g s between requests; capped at "
                "CRAWLDELAY_MAX_DELAY = %.6g s",
                authority,
                delay,
                self.max_delay,
            )
            delay = self.max_delay
        if delay:
            self._robots_delays[authority] = delay
        else:
            self._robots_delays.pop(authority, None)
        # The robots.txt request's own slot, and any slot with requests already queued.
        keys = set(self._slots_of.get(authority, ()))
        own_key = _slots.slot_key(request)
        if own_key is not None:
            keys.add(own_key)
        for key in keys:
            self._update(key, authority, request)

    #: While requests wait in floored slots, the engine asks the scheduler for more
    #: this often (see _slots.wake_engine).
    POLL_INTERVAL = 0.2

    def _engine_started(self) -> None:
        try:
            _slots.check_engine(self.crawler)
            if self.max_waiting:
                _slots.leave_out_of_concurrency(self.crawler, self.waiting, self.max_waiting)
                self._gate.set_places(self._has_place)
        except _slots.SeamError as exc:
            self._stop(exc)
            return
        if self.max_waiting:
            self._poll = create_looping_call(self._poll_while_waiting)
            self._poll.start(self.POLL_INTERVAL, now=False)
        if self._fleet is not None and self._backoff is not None:
            self._holds_poll = create_looping_call(self._poll_fleet_holds)
            self._holds_poll.start(self.HOLDS_POLL_INTERVAL, now=False)
        self.crawler.signals.connect(self._engine_stopped, signal=signals.engine_stopped)

    def _stop(self, exc: _slots.SeamError) -> None:
        """Stop the crawl before any request is sent: a seam moved."""
        logger.error("%s", exc)
        self.stats.set_value("crawldelay/seam_changed", exc.seam)
        engine = self.crawler.engine
        engine.pause()
        deferred_from_coro(engine.close_spider_async(reason="crawldelay_seam_changed"))

    def _poll_while_waiting(self) -> None:
        if self.waiting():
            # A place also frees, with no request leaving, when a slot gets its gate
            # with requests already queued: they start waiting.
            self._gate.start_parked(self._wake)
            _slots.wake_engine(self.crawler)

    def _wake(self, key: str) -> None:
        _slots.wake(self.crawler, key)

    def _engine_stopped(self) -> None:
        for poll in (self._poll, self._holds_poll):
            if poll is not None and poll.running:
                poll.stop()

    #: How often a process of a fleet reads which hosts the fleet holds (seconds).
    HOLDS_POLL_INTERVAL = 0.5
    #: A hold read from the fleet is taken when it ends this much later than the
    #: process's own (seconds): its own holds come back with the round trip added.
    HOLDS_MARGIN = 0.5

    def _poll_fleet_holds(self) -> None:
        deferred_from_coro(self._learn_fleet_holds())

    async def _learn_fleet_holds(self) -> None:
        assert self._fleet is not None and self._backoff is not None
        now = _slots.slot_clock()
        for key, seconds in await self._fleet.holds():
            if now + seconds > self._backoff.held_until(key) + self.HOLDS_MARGIN:
                self._backoff.learn(key, seconds)
                self._apply_floor(key)

    def _reached(self, request: Request, spider: Any = None) -> None:
        self._in_slots += 1
        key = _slots.slot_key(request)
        if key is None:
            return
        self._update(key, authority_of(request), request)
        slot = _slots.slot(self.crawler, key)
        if slot is None:
            return
        if self._fleet is not None and request.meta.get(META_ROBOTS) and not _slots.is_gated(slot):
            # A robots.txt fetch is spaced by the fleet too, from the first one on: the
            # processes that wait for its copy learn the floor from it, and their first
            # request must wait the floor after it ended.
            self._set_floor(slot, 0.0, gated=True)
        if _slots.is_gated(slot):
            self._gate.wait([request])  # Scrapy queues it in the slot next

    def _downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        assert self._backoff is not None
        key = self._backoff.downloaded(response, request)
        if key is not None:  # held: the slot's floor is at least BACKOFF_DELAY now
            self._update(key, authority_of(request), request)

    def _hold_ended(self, key: str) -> None:
        _slots.wake(self.crawler, key)
        _slots.wake_engine(self.crawler)

    def _left(self, request: Request, spider: Any = None) -> None:
        key = _slots.slot_key(request)
        slot = _slots.slot(self.crawler, key) if key is not None else None
        self._in_slots -= 1
        self._gate.stop_waiting([request])
        self._gate.start_parked(self._wake)  # its place, before the engine takes it
        if key is None or slot is None:
            return
        _slots.mark_end(slot)
        self._last_seen.record(key, _slots.last_seen(slot))
        started_by_gate = self._gate.ended(key)
        if not _slots.is_gated(slot):
            return
        floor = self.floor(key)
        if self._fleet is not None and started_by_gate:
            self._fleet.ended(key, floor)
        if not floor:  # a fleet's robots.txt fetch, done: the slot is Scrapy's again
            self._set_floor(slot, 0.0, gated=False)
        _slots.wake(self.crawler, key)

    def _set_floor(self, slot: Slot, floor: float, gated: bool) -> None:
        """Give *slot* *floor*, and the gate if *gated*; its queued requests wait for
        the gate as long as it has one."""
        was_gated = _slots.is_gated(slot)
        _slots.set_floor(slot, floor, self._gate if gated else None)
        if was_gated != gated:
            queued = _slots.queued_requests(slot)
            (self._gate.wait if gated else self._gate.stop_waiting)(queued)

    # -- concurrency -----------------------------------------------------

    def _has_place(self) -> bool:
        """Whether a request waiting in a floored slot may start: fewer requests than
        ``CONCURRENT_REQUESTS`` in the downloader's slots besides the waiting ones.
        (Requests still in downloader middlewares are not counted: some of them wait
        for a robots.txt fetch that may be queued behind a waiting request.)"""
        return self._concurrency <= 0 or self._in_slots - self._gate.waiting < self._concurrency

    def waiting(self) -> int:
        """How many requests wait in floored slots for their turn.  Up to
        ``CRAWLDELAY_MAX_WAITING`` of them do not count against
        ``CONCURRENT_REQUESTS`` while they wait, so that a host with a long
        Crawl-delay cannot hold every place (the first page after a robots.txt, a
        request that bypassed the scheduler's queue), and the other hosts crawl as
        fast as without it; each takes a place again to start."""
        return self._gate.waiting

    # -- floors ----------------------------------------------------------

    def _site_delay(self, authority: str, request: Request) -> float:
        delay = self._robots_delays.get(authority, 0.0)
        host = urlparse_cached(request).hostname
        if self.policy is not None and host:
            delay = max(delay, self.policy.limits_for(host).delay or 0.0)
        return delay

    def _update(self, key: str, authority: str, request: Request) -> None:
        """Record what *authority* asks of slot *key*, then apply the slot's floor."""
        site_delay = self._site_delay(authority, request)
        sites = self._site_delays.get(key)
        if site_delay:
            self._site_delays.setdefault(key, {})[authority] = site_delay
            self._slots_of.setdefault(authority, set()).add(key)
        elif sites is not None:
            sites.pop(authority, None)
        self._apply_floor(key)

    def _apply_floor(self, key: str) -> None:
        """Give slot *key*, if live, its floor now."""
        slot = _slots.slot(self.crawler, key)
        floor = self.floor(key)
        if slot is None or _slots.floor_of(slot) == floor:
            return
        if not _slots.is_gated(slot):
            last_seen = self._last_seen.get(key)
            if last_seen is not None:
                # Scrapy collected the idle slot and made a new one: keep the spacing.
                _slots.continue_after(slot, last_seen)
            if _slots.transferring(slot):
                self._gate.started_elsewhere(key)  # its end comes before the next start
        self._set_floor(slot, floor, gated=bool(floor))
        if floor > self._slot_delays.get(key, self._default_delay):
            self.stats.inc_value("crawldelay/applied")
        logger.debug("Slot %s: at least %.6g s from one request's end to the next", key, floor)
