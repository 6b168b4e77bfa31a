"""One-line enabling: ``ADDONS = {"scrapy_rfc9309.Addon": 500}``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as BuiltinRobotsTxtMiddleware
from scrapy.utils.misc import load_object

from ._redis import redacted_url
from ._settings import (
    FLEET_WAY_OUT,
    SettingError,
    deliberate,
    flag,
    fleet_off,
    mistakes,
    report_configuration_errors_in_one_line,
    scrapy_redis_other_client,
    scrapy_redis_url,
    source,
)
from .downloadermiddlewares.budget import DomainBudgetMiddleware
from .downloadermiddlewares.robotstxt import (
    RobotsTxtDecompressionMiddleware,
    RobotsTxtMiddleware,
)
from .extensions.crawldelay import CrawlDelayGate, CrawlDelayThrottle
from .pqueues import HostReadyPriorityQueue
from .spidermiddlewares.pagedirectives import PageDirectivesMiddleware
from .spidermiddlewares.startpace import StartPaceMiddleware

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

#: Where the add-on puts the components, unless the user placed them already.
#: The robots middleware takes the built-in one's place, after OffsiteMiddleware (50).
ROBOTS_ORDER = 100
#: After HttpCompressionMiddleware (590): robots.txt bodies are decoded within the
#: size limit before Scrapy would decode them whole.
DECOMPRESSION_ORDER = 595
#: After HttpCacheMiddleware (900): cache hits never reach it and cost no budget.
BUDGET_ORDER = 950
#: After Scrapy's AutoThrottle (0): its handlers run first; the floor holds either way.
CRAWLDELAY_ORDER = 500
#: The throttle's gate: after HttpCacheMiddleware (900), so that cache hits never
#: wait, and before the budget (950), so that a request handed back to the scheduler
#: has reserved nothing.
GATE_ORDER = 940
#: Among Scrapy's spider middlewares, next to the other filters of what a page yields.
PAGE_DIRECTIVES_ORDER = 550
#: Nearest the engine: what it waits for is the scheduler's room.
START_PACE_ORDER = 10


#: The scheduler priority queue that releases a request only when its host is ready.
HOST_READY_QUEUE = "scrapy_rfc9309.pqueues.HostReadyPriorityQueue"
#: Its twin for a fleet's shared scrapy-redis queue.
HOST_READY_REDIS_QUEUE = "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"
#: scrapy-redis's dupefilter, and the package's, which keeps what Redis cannot check.
SCRAPY_REDIS_DUPEFILTER = "scrapy_redis.dupefilter.RFPDupeFilter"
PACKAGE_DUPEFILTER = "scrapy_rfc9309.dupefilter.RedisDupeFilter"


class Addon:
    """Replaces Scrapy's built-in ``RobotsTxtMiddleware`` with this package's, adds
    the package's components, keeping any order the user already set, turns the
    Crawl-delay throttle and backing off on unless the user turned them off, obeys
    page-level ``nofollow``, and has the scheduler
    release requests only to ready hosts unless the project chose its own
    ``SCHEDULER_PRIORITY_QUEUE``.  Logs a WARNING for each
    setting that would silently do nothing (see :func:`._settings.mistakes`)."""

    def update_settings(self, settings: BaseSettings) -> None:
        report_configuration_errors_in_one_line()
        name = "DOWNLOADER_MIDDLEWARES"
        settings.set_in_component_priority_dict(name, BuiltinRobotsTxtMiddleware, None)
        settings.setdefault_in_component_priority_dict(name, RobotsTxtMiddleware, ROBOTS_ORDER)
        settings.setdefault_in_component_priority_dict(
            name, RobotsTxtDecompressionMiddleware, DECOMPRESSION_ORDER
        )
        # Active only with DOMAINBUDGET_ENABLED = True.
        settings.setdefault_in_component_priority_dict(name, DomainBudgetMiddleware, BUDGET_ORDER)
        settings.setdefault_in_component_priority_dict(
            "EXTENSIONS", CrawlDelayThrottle, CRAWLDELAY_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", PageDirectivesMiddleware, PAGE_DIRECTIVES_ORDER
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", StartPaceMiddleware, START_PACE_ORDER
        )
        settings.setdefault_in_component_priority_dict(name, CrawlDelayGate, GATE_ORDER)
        settings.set("CRAWLDELAY_ENABLED", True, priority="addon")
        settings.set("BACKOFF_ENABLED", True, priority="addon")
        if flag(settings, "CRAWLDELAY_ENABLED"):
            settings.set("SCHEDULER_PRIORITY_QUEUE", HOST_READY_QUEUE, priority="addon")
            self._say_the_projects_queue_is_kept(settings)
        self._share_with_scrapy_redis(settings)
        for mistake in mistakes(settings):
            logger.warning("scrapy_rfc9309: %s", mistake)
        if not flag(settings, "ROBOTSTXT_OBEY") and deliberate(settings, "ROBOTSTXT_OBEY"):
            logger.info(
                "scrapy_rfc9309: ROBOTSTXT_OBEY is False (%s): robots.txt is not obeyed",
                source(settings, "ROBOTSTXT_OBEY"),
            )

    @staticmethod
    def _say_the_projects_queue_is_kept(settings: BaseSettings) -> None:
        """The project's own ``SCHEDULER_PRIORITY_QUEUE`` is kept: say, at INFO, what it
        costs (Scrapy's queues hand out pages whose unit is not ready)."""
        queue = settings.get("SCHEDULER_PRIORITY_QUEUE")
        if scrapy_redis_url(settings) is not None:
            return  # scrapy-redis's scheduler has queues of its own
        try:
            loaded = load_object(queue)
        except (ImportError, NameError, ValueError):  # Scrapy says so as it loads it
            return
        if isinstance(loaded, type) and issubclass(loaded, HostReadyPriorityQueue):
            return
        logger.info(
            "scrapy_rfc9309: SCHEDULER_PRIORITY_QUEUE = %r (%s) is kept: it hands out pages "
            "whose host is not ready (a Crawl-delay, a hold after a 429/503), and each "
            "waits up to 5 s at a time in the downloader, taking one of "
            "CONCURRENT_REQUESTS; %s keeps them in the scheduler until their host is ready",
            queue,
            source(settings, "SCHEDULER_PRIORITY_QUEUE"),
            HOST_READY_QUEUE,
        )

    @staticmethod
    def _share_with_scrapy_redis(settings: BaseSettings) -> None:
        """With scrapy-redis's scheduler, a fleet: share spacing, holds and robots.txt
        through the Redis scrapy-redis uses, unless ``FLEET_REDIS_URL`` says otherwise,
        and hand out requests from it by readiness (``HostReadyRedisQueue``) unless
        the project chose its ``SCHEDULER_QUEUE_CLASS``."""
        shared = scrapy_redis_url(settings)
        if shared is None:
            return
        _warn_of_scrapy_redis_dupefilter(settings)
        fleet = settings.get("FLEET_REDIS_URL")
        if fleet is not None and fleet_off(fleet):
            logger.info(
                "scrapy_rfc9309: FLEET_REDIS_URL = False: each process of this scrapy-redis "
                "fleet is polite alone (spacing, holds and robots.txt not shared)"
            )
            return
        # The fleet's scripts and the shared queue's run on one Redis server.
        other_client = scrapy_redis_other_client(settings)
        if fleet is None:
            if other_client is not None:
                raise SettingError(
                    f"scrapy_rfc9309: scrapy-redis's REDIS_PARAMS['redis_cls'] is "
                    f"{other_client}, not redis-py's client of one server: the fleet shares "
                    f"politeness through one Redis server; {FLEET_WAY_OUT}"
                )
            settings.set("FLEET_REDIS_URL", shared, priority="addon")
        if flag(settings, "CRAWLDELAY_ENABLED") and other_client is None:
            settings.set("SCHEDULER_QUEUE_CLASS", HOST_READY_REDIS_QUEUE, priority="addon")
        logger.info(
            "scrapy_rfc9309: scrapy-redis's scheduler: spacing, holds and robots.txt are "
            "shared by the fleet through %s%s; queue: %s",
            redacted_url(str(settings.get("FLEET_REDIS_URL"))),
            " (scrapy-redis's Redis; FLEET_REDIS_URL = False keeps them per process)"
            if fleet is None
            else "",
            settings.get("SCHEDULER_QUEUE_CLASS") or "scrapy-redis's default",
        )


def _warn_of_scrapy_redis_dupefilter(settings: BaseSettings) -> None:
    """With scrapy-redis's scheduler, a WARNING if ``DUPEFILTER_CLASS`` is
    scrapy-redis's own, which raises while Redis is away.  Each raise comes out of
    Scrapy's ``engine.crawl()`` and ends one of the ``CONCURRENT_ITEMS`` tasks that
    work through a page's output; once all have ended, what is left of the output
    waits for good in a queue of twice as many places, and the crawl never ends."""
    dupefilter = settings.get("DUPEFILTER_CLASS")
    if isinstance(dupefilter, type):
        dupefilter = f"{dupefilter.__module__}.{dupefilter.__qualname__}"
    if dupefilter == SCRAPY_REDIS_DUPEFILTER:
        logger.warning(
            "scrapy_rfc9309: DUPEFILTER_CLASS is scrapy-redis's: while Redis is away it "
            "raises for every new request, which is lost, and a page that yields more "
            "than %d (twice CONCURRENT_ITEMS) then stops the process for good, its crawl "
            "never ending; %s lets them through: set DUPEFILTER_CLASS to it",
            2 * settings.getint("CONCURRENT_ITEMS"),
            PACKAGE_DUPEFILTER,
        )
