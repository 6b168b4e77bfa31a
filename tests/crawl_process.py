"""Run one crawl in this process, as a user's crawler process would:

    python -m tests.crawl_process [--dedupe | --follow | --redis-spider] SETTINGS_JSON URL...

``--dedupe``: the URLs go through the dupefilter; ``--follow``: so do the links of
the pages, which are followed.  ``--redis-spider``: a scrapy-redis
``RedisSpider`` that takes its start URLs from the Redis list ``pages:start_urls``
(pushed by the caller once every process has added one to ``pages:ready`` as its
spider opened, then ``pages:started`` set; no URL arguments), as a fleet's processes
do, follows the links of the pages it gets (through the fleet's queue), and closes
after 2 idle seconds from then (``MAX_IDLE_TIME_BEFORE_CLOSE``, scrapy-redis's
setting, to wait longer).  Used by tests that need a crawler they can kill, several crawler
processes, or the peak memory of one crawl.  The last line printed is the crawl's
stats as JSON, with ``test/peak_rss_kib``: this process's peak resident memory since
it started (``VmHWM``; a parent's ``ru_maxrss`` of it would count the parent's own
memory, which the child held between the fork and the exec)."""

import contextlib
import faulthandler
import json
import signal
import sys
import tempfile
import time

import scrapy
from scrapy.crawler import AsyncCrawlerProcess, CrawlerProcess
from scrapy.exceptions import DontCloseSpider, IgnoreRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.asyncio import call_later


class Pages(scrapy.Spider):
    name = "pages"
    follow = False

    async def start(self):
        for url in self.urls:
            yield scrapy.Request(url, dont_filter=not self.dedupe)

    def parse(self, response):
        if self.follow:
            yield from response.follow_all(css="a")


def redis_pages():
    from scrapy_redis.spiders import RedisSpider

    class RedisPages(RedisSpider):
        name = "pages"
        redis_key = "pages:start_urls"
        max_idle_time = None  # MAX_IDLE_TIME_BEFORE_CLOSE: 2 unless the caller says
        started = False
        look_pending = False

        def spider_idle(self):
            # Idle time counts from the moment the caller pushed the start URLs: a
            # process open before them, waiting for the others to start, is not idle.
            if not self.started:
                self.spider_idle_start_time = int(time.time())
            try:
                return super().spider_idle()
            except DontCloseSpider:
                # Not idle long enough: the engine would look again at its next
                # heartbeat (every 5 s); it looks when the idle time is over (0:
                # never closes, nothing to look for).
                if self.started and self.max_idle_time and not self.look_pending:
                    self.look_pending = True
                    ends = self.spider_idle_start_time + self.max_idle_time
                    call_later(max(ends - time.time(), 0) + 0.05, self.look)
                raise

        def look(self):
            """Have the engine look at its scheduler and its idle spider: a request
            of the spider's own, dropped as it is scheduled (as the package's
            engine waker does; not that waker, whose wakes the tests count)."""
            self.look_pending = False
            look = scrapy.Request("data:,", callback=NO_CALLBACK, meta={"test_look": True})
            with contextlib.suppress(RuntimeError):  # the crawl closed meanwhile
                self.crawler.engine.crawl(look)

        def look_for_start(self):
            # Read the first start URLs as soon as the caller says they are there,
            # not at the engine's next look at its idle spider (its 5 s heartbeat).
            if not self.server.exists("pages:started"):
                call_later(0.05, self.look_for_start)
                return
            self.started = True
            self.spider_idle_start_time = int(time.time())
            self.schedule_next_requests()

        def parse(self, response):
            # The engine's wakes so far: those after the last page are the idle ones.
            stats = self.crawler.stats
            stats.set_value(
                "test/wakes_by_last_page", stats.get_value("crawldelay/engine_wakes", 0)
            )
            yield from response.follow_all(css="a")

    return RedisPages


def drop_looks(request, spider):
    if request.meta.get("test_look"):
        raise IgnoreRequest


def say_ready(spider):
    import redis

    redis.Redis.from_url(spider.settings["REDIS_URL"]).incr("pages:ready")
    spider.look_for_start()


def peak_rss_kib() -> int:
    """This process's peak resident memory since its program started (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck crawl's stacks
    mode, *args = sys.argv[1:]
    if not mode.startswith("--"):
        mode, args = "", [mode, *args]
    settings_json, *urls = args
    defaults = {
        "LOG_LEVEL": "WARNING",
        "MAX_IDLE_TIME_BEFORE_CLOSE": 2,
        "TELNETCONSOLE_ENABLED": False,
        # A cache of this crawl's own unless the caller names one (tests share ports).
        "RFC9309_PERSISTENT_CACHE_PATH": tempfile.mktemp(suffix=".sqlite"),
    }
    settings = {**defaults, **json.loads(settings_json)}
    # Without the Twisted reactor (Scrapy 2.19's asyncio-native mode), Scrapy runs
    # crawls with AsyncCrawlerProcess only.
    reactorless = settings.get("TWISTED_REACTOR_ENABLED") is False
    process = (AsyncCrawlerProcess if reactorless else CrawlerProcess)(settings)
    if mode == "--redis-spider":
        crawler = process.create_crawler(redis_pages())
        crawler.signals.connect(say_ready, signal=scrapy.signals.spider_opened)
        crawler.signals.connect(drop_looks, signal=scrapy.signals.request_scheduled)
        process.crawl(crawler)
    else:
        crawler = process.create_crawler(Pages)
        follow = mode == "--follow"
        process.crawl(crawler, urls=urls, dedupe=mode == "--dedupe" or follow, follow=follow)
    process.start()
    stats = crawler.stats.get_stats()
    stats["test/twisted_reactor"] = "twisted.internet.reactor" in sys.modules
    stats["test/peak_rss_kib"] = peak_rss_kib()
    print(json.dumps(stats, default=str))


if __name__ == "__main__":
    main()
