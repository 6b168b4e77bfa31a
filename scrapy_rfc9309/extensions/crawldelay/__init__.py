"""Extension: every politeness unit (``CRAWLDELAY_UNIT``: a host by default) spaced
by at least ``max(configured delay, the budget policy's delay, robots.txt
Crawl-delay / Request-rate)``, end to start.

The configured delay is ``DOWNLOAD_DELAY`` or the host's ``DOWNLOAD_SLOTS`` delay;
the policy's is its ``delay`` (or ``1 / qps``) for the host; the robots.txt delay is
that of the group applying to the crawler's product token, learnt from Scrapy's
``robots_parsed`` signal (sent by this package's robots middleware and by Scrapy's
built-in one), capped at ``CRAWLDELAY_MAX_DELAY``.  A unit's floor is the largest of
its hosts'.

This extension knows the floors and the holds (see :mod:`._backoff`); the gate
(:mod:`._gate`, a downloader middleware) keeps them, and the scheduler's queues
(:mod:`._pqueue`, :mod:`._redisqueue`) hand requests out by readiness.  They meet in
one :class:`~._politeness.Politeness` per crawler.  Only Scrapy's public interfaces
are used: settings, signals, the downloader-middleware and priority-queue
interfaces.  With ``FLEET_REDIS_URL``, the spacing holds across the fleet's
processes (see :mod:`._fleet`).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import AsyncioLoopingCall, create_looping_call
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached

from ..._redis import redacted_url
from ..._settings import (
    CrawlDelaySettings,
    report_configuration_errors_in_one_line,
    require_asyncio,
    spider_download_delay,
)
from ..._shared import META_ROBOTS, ROBOTS_PARSED, authority_of, crawler_token, offers
from ...downloadermiddlewares.budget._setup import load_policy
from ...robotparser import RobotParser
from ._backoff import Backoff
from ._fleet import FleetGates
from ._gate import CrawlDelayGate
from ._politeness import politeness

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser as ScrapyRobotParser
    from twisted.internet.task import LoopingCall
    from typing_extensions import Self

    from ...budget.policy import BudgetPolicy

__all__ = ["CrawlDelayGate", "CrawlDelayThrottle"]

logger = logging.getLogger(__name__)


class CrawlDelayThrottle:
    def __init__(self, crawler: Crawler) -> None:
        report_configuration_errors_in_one_line()
        config = CrawlDelaySettings.from_settings(
            crawler.settings, partial(spider_download_delay, crawler)
        )
        if config is None:
            raise NotConfigured
        require_asyncio("CRAWLDELAY_ENABLED")
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_delay = config.max_delay
        self.politeness = polite = politeness(crawler)
        self._fleet: FleetGates | None = None
        if config.fleet_url:
            self._fleet = FleetGates(crawler, config.fleet_url, config.lease)
            crawler.signals.connect(self._fleet.close, signal=signals.spider_closed)
        self._backoff: Backoff | None = None
        if config.backoff is not None:
            self._backoff = Backoff(crawler, config.backoff, self._fleet, polite.changed)
            crawler.signals.connect(self._downloaded, signal=signals.response_downloaded)
            crawler.signals.connect(self._backoff.close, signal=signals.spider_closed)
        self.policy: BudgetPolicy | None = None
        settings = crawler.settings
        if settings.get("DOMAINBUDGET_POLICY_FILE") or settings.get("DOMAINBUDGET_POLICY"):
            self.policy = load_policy(settings)
        self._default_delay, self._slot_delays = config.default_delay, config.slot_delays
        self.max_floor = max(
            self.max_delay,
            self._default_delay,
            *self._slot_delays.values(),
            config.backoff.delay if config.backoff is not None else 0.0,
            self.policy.max_delay() if self.policy is not None else 0.0,
        )
        self._user_agent, self._default_user_agent = config.user_agent, config.default_user_agent
        # What each unit's sites ask for, by source (an authority's robots.txt, a
        # host's configured or policy delay); only non-zero delays are kept.
        self._site_delays: dict[str, dict[str, float]] = {}
        self._learnt: set[str] = set()  # hosts whose configured and policy delays are known
        #: Whether any host has a delay of its own (DOWNLOAD_SLOTS, the budget policy):
        #: if none has, :meth:`learn` keeps no record of each host (87 bytes a host).
        self._hosts_have_delays = bool(self._slot_delays) or bool(
            self.policy is not None and self.policy.max_delay()
        )
        self.gate_enabled = False  # set by the gate: the start-up check wants it
        polite.limit_by(self)
        self._holds_poll: AsyncioLoopingCall | LoopingCall | None = None
        self._stall_after = config.stall_after
        backoff = config.backoff
        self._max_hold = max(backoff.max_retry_after, backoff.maximum) if backoff else 0.0
        self._stalled: set[str] = set()  # authorities whose stall was logged
        self._watch: AsyncioLoopingCall | LoopingCall | None = None
        self._live_view_every = config.live_view_every
        self._live_view: AsyncioLoopingCall | LoopingCall | None = None
        self._offers = offers(crawler)
        autothrottle = ""
        if crawler.settings.getbool("AUTOTHROTTLE_ENABLED"):
            autothrottle = (
                f"; AutoThrottle on: at most {polite.concurrency('')} request(s) at once to a "
                f"{config.unit} without a floor (AUTOTHROTTLE_TARGET_CONCURRENCY)"
            )
        logger.info(
            "Crawl-delay throttle: requests to a %s at least max(DOWNLOAD_DELAY = %.6g s, "
            "robots.txt Crawl-delay up to %.6g s, the budget policy's delay) after the "
            "previous one ended; %s%s",
            config.unit,
            self._default_delay,
            self.max_delay,
            f"spacing shared through the fleet Redis {redacted_url(config.fleet_url)}"
            if config.fleet_url
            else "spacing kept in this process",
            autothrottle,
        )
        offers(crawler).throttle = self
        crawler.signals.connect(self._robots_parsed, signal=ROBOTS_PARSED)
        crawler.signals.connect(self._engine_started, signal=signals.engine_started)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def floor(self, key: str) -> float:
        """The least time from the end of one request of unit *key* to the start of
        the next, in seconds."""
        backoff = self._backoff.delay(key) if self._backoff is not None else 0.0
        return max(self._default_delay, backoff, *self._site_delays.get(key, {}).values())

    def held_until(self, key: str) -> float:
        """Until when unit *key* is held (it asked to slow down), on the monotonic clock."""
        return self._backoff.held_until(key) if self._backoff is not None else 0.0

    # -- what the sites and the settings ask for --------------------------

    def learn(self, key: str, request: Request) -> None:
        """Note the configured and policy delays of *request*'s host in unit *key*'s
        floor (once per host)."""
        if not self._hosts_have_delays:
            return
        host = urlparse_cached(request).hostname or ""
        if host in self._learnt:
            return
        self._learnt.add(host)
        delay = self._slot_delays.get(host, 0.0)
        if self.policy is not None and host:
            delay = max(delay, self.policy.limits_for(host).delay or 0.0)
        if delay:
            self._set(key, f"host {host}", delay)

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
        self._set(self.politeness.unit(request), authority, delay or 0.0)

    def _set(self, key: str, source: str, delay: float) -> None:
        """*source* asks unit *key* for *delay* (0: nothing)."""
        sources = self._site_delays.get(key)
        if delay:
            if sources is None:
                sources = self._site_delays[key] = {}
            if sources.get(source) == delay:
                return
            sources[source] = delay
            if delay > self._default_delay:
                self.stats.inc_value("crawldelay/applied")
            logger.debug(
                "%s: at least %.6g s from one request's end to the next (%s asks for %.6g s)",
                key,
                self.floor(key),
                source,
                delay,
            )
        elif sources is not None and sources.pop(source, None) is not None and not sources:
            del self._site_delays[key]
        self.politeness.changed(key)

    # -- backing off ------------------------------------------------------

    def _downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        assert self._backoff is not None
        self._backoff.downloaded(response, self.politeness.unit(request))

    #: How often a process of a fleet reads which units the fleet holds (seconds).
    HOLDS_POLL_INTERVAL = 0.5
    #: A hold read from the fleet is taken when it ends this much later than the
    #: process's own (seconds): its own holds come back with the round trip added.
    HOLDS_MARGIN = 0.5

    def _poll_fleet_holds(self) -> None:
        deferred_from_coro(self._learn_fleet_holds())

    async def _learn_fleet_holds(self) -> None:
        assert self._fleet is not None and self._backoff is not None
        now = self.politeness.now()
        for key, seconds in await self._fleet.holds():
            if now + seconds > self._backoff.held_until(key) + self.HOLDS_MARGIN:
                self._backoff.learn(key, seconds)

    # -- the fleet, for the gate ------------------------------------------

    def needs_fleet(self, key: str, request: Request) -> bool:
        """Whether a request of unit *key* must be admitted by the fleet's Redis too:
        a floored unit's, and a robots.txt fetch (the processes that wait for its
        copy learn the floor from it, and their first request must wait the floor
        after it ended)."""
        return self._fleet is not None and bool(self.floor(key) or request.meta.get(META_ROBOTS))

    async def fleet_acquire(self, key: str, token: str | None = None) -> float:
        """See :meth:`FleetGates.acquire`."""
        assert self._fleet is not None
        return await self._fleet.acquire(key, self.floor(key), token)

    def fleet_release(self, key: str, reached: bool = True) -> None:
        assert self._fleet is not None
        self._fleet.release(key, self.floor(key), reached)

    # -- start and stop ---------------------------------------------------

    def _engine_started(self) -> None:
        if not self.gate_enabled:
            logger.error(
                "CrawlDelayThrottle is enabled without its gate: add "
                "'scrapy_rfc9309.CrawlDelayGate': 940 to DOWNLOADER_MIDDLEWARES (the "
                "add-on does); no request can be spaced, so the crawl stops"
            )
            engine = self.crawler.engine
            deferred_from_coro(engine.close_spider_async(reason="crawldelay_gate_missing"))
            return
        self._watch = create_looping_call(self._look_for_stalls)
        self._watch.start(self.WATCH_INTERVAL, now=False)
        if self._live_view_every:
            self._live_view = create_looping_call(self.log_live_view)
            self._live_view.start(self._live_view_every, now=False)
        if self._fleet is not None and self._backoff is not None:
            self._holds_poll = create_looping_call(self._poll_fleet_holds)
            self._holds_poll.start(self.HOLDS_POLL_INTERVAL, now=False)
        self.crawler.signals.connect(self._engine_stopped, signal=signals.engine_stopped)

    def _engine_stopped(self) -> None:
        for call in (self._holds_poll, self._watch, self._live_view):
            if call is not None and call.running:
                call.stop()

    # -- what the units wait for -----------------------------------------

    def live_view(self) -> dict[str, float]:
        """What the units with requests waiting in this process wait for, as stats:
        ``crawldelay/units_ready``, ``/units_in_progress``, ``/units_spaced`` (and
        ``/longest_wait``, seconds), ``/units_held`` (and ``/held_for``, seconds
        left of the longest hold), ``/robots_pending`` (robots.txt fetches in flight
        or being read); ``domainbudget/domains_spent`` (today); with a fleet's shared
        queue, ``crawldelay/fleet_queue_left`` (the requests it holds, whichever
        process may take them)."""
        polite = self.politeness
        now = polite.now()
        counts = dict.fromkeys(("ready", "in progress", "spaced", "held"), 0)
        longest, held_for, reading = 0.0, 0.0, 0
        for key in polite.units_with_work():
            state = polite.state(key)
            if state == "robots.txt being read":
                reading += 1
                continue
            counts[state] += 1
            if state == "spaced":
                longest = max(longest, polite.ready_at(key) - now)
            elif state == "held":
                held_for = max(held_for, polite.held_until(key) - now)
        fetching = self._offers.robots_fetching
        spent = self._offers.budgets_spent
        fleet_left = self._offers.fleet_queue_left
        view = {
            "crawldelay/units_ready": counts["ready"],
            "crawldelay/units_in_progress": counts["in progress"],
            "crawldelay/units_spaced": counts["spaced"],
            "crawldelay/longest_wait": round(longest, 1),
            "crawldelay/units_held": counts["held"],
            "crawldelay/held_for": round(held_for, 1),
            "crawldelay/robots_pending": reading + (fetching() if fetching else 0),
            "domainbudget/domains_spent": spent() if spent else 0,
        }
        if fleet_left is not None:
            view["crawldelay/fleet_queue_left"] = fleet_left()
        return view

    def log_live_view(self) -> None:
        """One INFO line (every ``LOGSTATS_INTERVAL``, as Scrapy's own stats line) of
        what the units wait for; the same figures in the crawl's stats."""
        view = self.live_view()
        for name, value in view.items():
            self.stats.set_value(name, value)
        fleet = view.get("crawldelay/fleet_queue_left")
        logger.info(
            "Politeness: %d units ready, %d in progress, %d waiting for a Crawl-delay "
            "(longest %.0f s more), %d held after a 429/503 (for %.0f s more), %d "
            "robots.txt pending, %d daily budgets spent%s",
            view["crawldelay/units_ready"],
            view["crawldelay/units_in_progress"],
            view["crawldelay/units_spaced"],
            view["crawldelay/longest_wait"],
            view["crawldelay/units_held"],
            view["crawldelay/held_for"],
            view["crawldelay/robots_pending"],
            view["domainbudget/domains_spent"],
            "" if fleet is None else f"; {fleet:.0f} requests in the fleet's queue",
        )

    # -- stalls -----------------------------------------------------------

    #: How often the units' waits are looked at (seconds).
    WATCH_INTERVAL = 1.0

    def _look_for_stalls(self) -> None:
        """Log once, at WARNING, a wait much longer than anything should make it:
        a robots.txt decision pending longer than its fetch may take (every hop its
        timeout and a floor), or a request waiting for its unit longer than that and
        the longest hold.  No such wait is known to last; this names one if one does."""
        polite = self.politeness
        now = polite.now()
        for authority, since in polite.reading_since().items():
            self._stall(authority, now - since, "its robots.txt to be read", self._stall_after)
        longest = self._stall_after + self._max_hold
        for key, since in polite.waiting_since.items():
            self._stall(key, now - since, f"its turn ({polite.state(key)})", longest)

    def _stall(self, name: str, waited: float, waits_for: str, bound: float) -> None:
        if waited <= bound or name in self._stalled:
            return
        self._stalled.add(name)
        self.stats.inc_value("crawldelay/stalled")
        logger.warning(
            "%s: a request has waited %.0f s for %s, longer than anything should "
            "make it wait (%.0f s)",
            name,
            waited,
            waits_for,
            bound,
        )
