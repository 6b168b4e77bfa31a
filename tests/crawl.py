"""Run a real Scrapy crawl in the test's reactor."""

from __future__ import annotations

import itertools
import tempfile
import time
from typing import Any

import redis
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerRunner
from twisted.internet.task import LoopingCall

BASE_SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": True,
    "DOWNLOADER_MIDDLEWARES": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_rfc9309.RobotsTxtMiddleware": 100,
        "scrapy_rfc9309.RobotsTxtDecompressionMiddleware": 595,
    },
    "USER_AGENT": "TestBot/1.0 (+https://example.com/bot)",
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": False,
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
    "DOWNLOAD_DELAY": 0,
    "RETRY_ENABLED": False,
    # Scrapy starts CONCURRENT_ITEMS tasks for each response to work through its
    # callback's output (100 by default): a quarter of a broad crawl's CPU here (the
    # 800-page concurrency test: 17.3 s of user CPU, 12.4 s with 1), where no spider
    # yields more than a few items or requests a page.  The crawler processes
    # (tests/crawl_process.py) keep Scrapy's default: a fleet's processes share the
    # links of a seed page as they reach Redis, and 100 push them at once.
    "CONCURRENT_ITEMS": 1,
}


#: Each crawl keeps robots.txt across restarts in a file of its own (unless a test
#: names one): the sites of different tests may share a port, never their robots.txt.
_KEPT = tempfile.TemporaryDirectory(prefix="rfc9309-tests-")
_KEPT_FILES = itertools.count()


def fresh_robots_cache() -> str:
    """A path for a robots.txt cache file no crawl has used."""
    return f"{_KEPT.name}/robots-{next(_KEPT_FILES)}.sqlite"


class SlotOccupancy:
    """An extension that keeps, in the ``test/slot_active_max`` stat, the most requests
    one download slot held at once (queued in it or on the wire); with
    ``TEST_WATCHED_SLOT``, that slot only."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.watched = crawler.settings.get("TEST_WATCHED_SLOT")
        crawler.signals.connect(self.reached, signal=signals.request_reached_downloader)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SlotOccupancy:
        return cls(crawler)

    def reached(self, request: scrapy.Request, spider: Any = None) -> None:
        key = request.meta["download_slot"]
        if self.watched in (None, key):
            active = len(self.crawler.engine.downloader.slots[key].active)
            self.crawler.stats.max_value("test/slot_active_max", active)


class ReactorLag:
    """An extension that keeps, in the ``test/reactor_lag_max_ms`` stat, the longest
    the reactor was late, in ms, for a call due every 5 ms while the spider ran: how
    long one piece of work held the reactor's thread."""

    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self.call = LoopingCall(self.tick)
        self.last = 0.0
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReactorLag:
        return cls(crawler)

    def opened(self) -> None:
        self.last = time.perf_counter()
        self.call.start(0.005, now=False)

    def tick(self) -> None:
        now = time.perf_counter()
        self.stats.max_value("test/reactor_lag_max_ms", round((now - self.last) * 1000 - 5, 1))
        self.last = now

    def closed(self) -> None:
        self.call.stop()


class ListSpider(scrapy.Spider):
    """Requests the URLs it is given; records the URLs of the responses it gets."""

    name = "list"
    urls: list[str] = []

    async def start(self):
        for url in self.urls:
            yield scrapy.Request(url, callback=self.parse, dont_filter=True, meta=self.meta)

    def parse(self, response):
        self.seen.append(response.url)


class ChainSpider(ListSpider):
    """Requests its URLs one after another, calling ``between(response)`` in between."""

    name = "chain"

    async def start(self):
        yield self._next(0)

    def _next(self, index):
        return scrapy.Request(
            self.urls[index],
            callback=self.parse,
            errback=self.failed,
            dont_filter=True,
            cb_kwargs={"index": index},
        )

    def parse(self, response, index=0):
        self.seen.append(response.url)
        return self._continue(index, response)

    def failed(self, failure):
        return self._continue(failure.request.cb_kwargs["index"], None)

    def between(self, response):
        pass

    def _continue(self, index, response):
        if index + 1 < len(self.urls):
            self.between(response)
            yield self._next(index + 1)


async def crawl(
    urls: list[str],
    meta: dict[str, Any] | None = None,
    spider: type[scrapy.Spider] = ListSpider,
    **settings: Any,
) -> Crawler:
    """Crawl *urls* with the base settings updated by *settings*; return the crawler
    (its ``stats`` and ``spider.seen`` hold the results).  Extra spider attributes
    go in *meta* for ListSpider, or as ``spider_kwargs`` in settings."""
    spider_kwargs = settings.pop("spider_kwargs", {})
    settings.setdefault("RFC9309_PERSISTENT_CACHE_PATH", fresh_robots_cache())
    runner = CrawlerRunner({**BASE_SETTINGS, **settings})
    crawler = runner.create_crawler(spider)
    await crawler.crawl(urls=list(urls), meta=dict(meta or {}), seen=[], **spider_kwargs)
    return crawler


class _OwnConnection(redis.Connection):
    """A connection class of the project's own, as projects subclass redis-py's (to
    count, trace or retry): the shared queue cannot mirror it with its own client,
    so it calls redis-py for everything."""


class RedisOfOwnConnections(redis.Redis):
    """``REDIS_PARAMS = {"redis_cls": "tests.crawl.RedisOfOwnConnections"}``."""

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Any:
        return super().from_url(url, connection_class=_OwnConnection, **kwargs)
