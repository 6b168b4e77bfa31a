"""The Crawl-delay throttle in real crawls: the gaps between request starts
are measured in the server's own request log.  Each test sends a handful of requests."""

import itertools
import logging

import pytest
import pytest_twisted
from scrapy import signals
from twisted.internet import reactor
from twisted.internet.defer import Deferred, DeferredList, ensureDeferred

from tests.crawl import BASE_SETTINGS, ChainSpider, ListSpider, crawl

THROTTLE = {
    "CRAWLDELAY_ENABLED": True,
    "EXTENSIONS": {"scrapy_rfc9309.CrawlDelayThrottle": 500},
    "DOWNLOADER_MIDDLEWARES": {
        **BASE_SETTINGS["DOWNLOADER_MIDDLEWARES"],
        "scrapy_rfc9309.CrawlDelayGate": 940,
    },
}


def robots(site, body):
    site.route("/robots.txt", body=body)


def pages(site, count=4):
    return [f"{site.url}/p/{number}" for number in range(count)]


def gaps(site):
    """Seconds between the starts of consecutive page requests, as the server saw them."""
    times = [hit.time for hit in site.hits if hit.path.startswith("/p/")]
    assert len(times) >= 3, site.paths()
    return [later - earlier for earlier, later in itertools.pairwise(times)]


@pytest_twisted.ensureDeferred
async def test_crawl_delay_wins_over_a_shorter_delay_with_jitter_and_autothrottle_on(site):
    robots(site, b"User-agent: *\nCrawl-delay: 0.5\n")
    crawler = await crawl(
        pages(site),
        DOWNLOAD_DELAY=0.2,
        DOWNLOAD_DELAY_JITTER=0.9,
        AUTOTHROTTLE_ENABLED=True,
        AUTOTHROTTLE_START_DELAY=0.2,
        AUTOTHROTTLE_TARGET_CONCURRENCY=16,  # fast local answers: AutoThrottle wants 0.2 s
        **THROTTLE,
    )
    assert min(gaps(site)) >= 0.475
    assert crawler.stats.get_value("crawldelay/applied") == 1


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_two_crawls_of_one_process_share_a_sites_crawl_delay_through_the_fleet_redis(
    site, fleet_redis
):
    """Each crawl of a process spaces its own requests, as Scrapy's own delays: two
    spiders run at once against one site share its Crawl-delay (and one robots.txt
    fetch) through ``FLEET_REDIS_URL``, as the processes of a fleet do."""
    robots(site, b"User-agent: *\nCrawl-delay: 0.5\n")
    shared = {"FLEET_REDIS_URL": fleet_redis, **THROTTLE}
    both = [
        ensureDeferred(crawl([f"{site.url}/p/{name}{n}" for n in range(3)], **shared))
        for name in "ab"
    ]
    await DeferredList(both, fireOnOneErrback=True)
    assert site.paths().count("/robots.txt") == 1
    assert len(gaps(site)) == 5
    assert min(gaps(site)) >= 0.5


@pytest_twisted.ensureDeferred
async def test_a_crawl_delay_in_another_bots_group_does_not_slow_the_crawler(site):
    # The Disallow line closes OtherBot's group: without a rule in between, RFC 9309's
    # grammar makes "User-agent: *" share OtherBot's group, Crawl-delay included.
    robots(site, b"User-agent: OtherBot\nCrawl-delay: 5\nDisallow: /x\n\nUser-agent: *\nAllow: /\n")
    crawler = await crawl(pages(site), DOWNLOAD_DELAY=0.2, DOWNLOAD_DELAY_JITTER=0, **THROTTLE)
    assert min(gaps(site)) >= 0.15
    assert max(gaps(site)) < 4  # not OtherBot's 5 s (a generous bound: no timing claim)
    assert crawler.stats.get_value("crawldelay/applied") is None


@pytest_twisted.ensureDeferred
async def test_request_rate_is_a_delay(site):
    robots(site, b"User-agent: TestBot\nRequest-rate: 2/1\n")  # 2 per second: 0.5 s
    await crawl(pages(site, 3), **THROTTLE)
    assert min(gaps(site)) >= 0.475


@pytest_twisted.ensureDeferred
async def test_an_absurd_crawl_delay_is_capped(site):
    robots(site, b"User-agent: *\nCrawl-delay: 86400\n")
    crawler = await crawl(
        pages(site), CRAWLDELAY_MAX_DELAY=0.5, DOWNLOAD_DELAY_JITTER=0, **THROTTLE
    )
    assert min(gaps(site)) >= 0.45
    assert max(gaps(site)) < 30  # capped: not a day (a generous bound: no timing claim)
    assert crawler.stats.get_value("crawldelay/capped") == 1


@pytest_twisted.ensureDeferred
async def test_two_hosts_crawled_in_parallel_keep_their_own_delays(site, other_site):
    robots(site, b"User-agent: *\nCrawl-delay: 1\n")
    robots(other_site, b"User-agent: *\nCrawl-delay: 0.3\n")
    other_url = other_site.url.replace("127.0.0.1", "localhost")  # another slot
    other_pages = [url.replace(other_site.url, other_url) for url in pages(other_site)]
    await crawl(pages(site) + other_pages, **THROTTLE)
    assert min(gaps(site)) >= 0.95
    assert min(gaps(other_site)) >= 0.28
    # The other host was not held to this one's 1 s: all its pages came before this
    # host's last one (4 pages 1 s apart take 3 s; the other's 4 pages 0.3 s apart, 0.9 s).
    last = max(hit.time for hit in site.hits if hit.path.startswith("/p/"))
    assert all(hit.time < last for hit in other_site.hits if hit.path.startswith("/p/"))


class ForgetfulSpider(ChainSpider):
    """Requests one page after another; between two, drops every download slot, as
    Scrapy's slot collector does with a slot idle for long."""

    name = "forgetful"

    def between(self, response):
        slots = self.crawler.engine.downloader.slots
        for key in list(slots):
            slots.pop(key).close()


@pytest_twisted.ensureDeferred
async def test_a_slot_made_again_after_being_collected_keeps_its_floor(site):
    robots(site, b"User-agent: *\nCrawl-delay: 0.5\n")
    await crawl(pages(site, 3), spider=ForgetfulSpider, **THROTTLE)
    assert min(gaps(site)) >= 0.475


@pytest_twisted.ensureDeferred
async def test_the_budget_policys_delay_is_a_floor_too(site):
    robots(site, b"User-agent: *\nAllow: /\n")
    policy = {"default_policy": {"delay": 0.6}}
    await crawl(pages(site), DOMAINBUDGET_POLICY=policy, DOWNLOAD_DELAY_JITTER=0.9, **THROTTLE)
    assert min(gaps(site)) >= 0.57


class OldStyleSpider(ListSpider):
    """Asks for its delay with Scrapy's ``download_delay`` spider attribute."""

    name = "old-style"
    download_delay = 0.6


@pytest.mark.filterwarnings("ignore:The 'download_delay' spider attribute is deprecated")
@pytest_twisted.ensureDeferred
async def test_the_spiders_download_delay_attribute_is_a_floor_too(site):
    """Scrapy before 2.19 reads the attribute in its downloader, where it wins over
    ``DOWNLOAD_DELAY`` (2.19 turns it into the setting): with its jitter, Scrapy
    alone spaced the pages by as little as half of it."""
    robots(site, b"User-agent: *\nAllow: /\n")
    await crawl(pages(site, 10), spider=OldStyleSpider, DOWNLOAD_DELAY_JITTER=0.9, **THROTTLE)
    assert min(gaps(site)) >= 0.57


@pytest_twisted.ensureDeferred
async def test_the_addon_turns_the_throttle_on(site):
    robots(site, b"User-agent: *\nCrawl-delay: 0.5\n")
    settings = {**BASE_SETTINGS, "DOWNLOADER_MIDDLEWARES": {}}
    await crawl(pages(site, 3), ADDONS={"scrapy_rfc9309.Addon": 500}, **settings)
    assert min(gaps(site)) >= 0.475


@pytest_twisted.ensureDeferred
async def test_the_throttle_works_with_scrapys_own_middleware_and_our_parser(site):
    """Through Scrapy's robots_parsed signal (Scrapy >= 2.18); before it, Scrapy's
    middleware tells nobody about the file, and only the configured delay applies
    (as the README says)."""
    robots(site, b"User-agent: *\nCrawl-delay: 0.5\n")
    crawler = await crawl(
        pages(site),
        ROBOTSTXT_PARSER="scrapy_rfc9309.RobotParser",
        DOWNLOAD_DELAY=0.2,
        DOWNLOAD_DELAY_JITTER=0,
        **{
            **THROTTLE,
            # Scrapy's own RobotsTxtMiddleware, and the gate
            "DOWNLOADER_MIDDLEWARES": {"scrapy_rfc9309.CrawlDelayGate": 940},
        },
    )
    assert crawler.stats.get_value("robotstxt/request_count") == 1  # the built-in one ran
    if hasattr(signals, "robots_parsed"):
        assert min(gaps(site)) >= 0.475
        assert crawler.stats.get_value("crawldelay/applied") == 1
    else:
        assert min(gaps(site)) >= 0.19
        assert crawler.stats.get_value("crawldelay/applied") is None


@pytest_twisted.ensureDeferred
async def test_requests_already_queued_when_a_robots_txt_arrives_get_its_delay(site, other_site):
    """Scrapy's slots are per host name: both sites (two ports of 127.0.0.1) share one.
    The other site's robots.txt arrives while this site's pages wait in that slot;
    none of its own pages is allowed, so only its arrival can raise the floor."""
    robots(site, b"User-agent: *\nAllow: /\n")
    robots(other_site, b"User-agent: *\nCrawl-delay: 0.5\nDisallow: /\n")
    await crawl(
        pages(site) + pages(other_site, 1), DOWNLOAD_DELAY=0.3, DOWNLOAD_DELAY_JITTER=0, **THROTTLE
    )
    assert other_site.paths() == ["/robots.txt"]
    assert min(gaps(site)) >= 0.475


@pytest_twisted.ensureDeferred
async def test_a_robots_txt_fetch_queued_behind_a_waiting_request_does_not_hang_the_crawl(
    site, other_site
):
    """Both sites share a slot (one host name), gated by the site's Crawl-delay.  The
    other site's page holds the only place of CONCURRENT_REQUESTS while it waits for
    its robots.txt, whose fetch is queued in that slot behind the site's second page:
    that page needs a place to start, and one held in a downloader middleware must
    not count, or neither would ever start."""
    robots(site, b"User-agent: *\nCrawl-delay: 0.3\n")
    robots(other_site, b"User-agent: *\nAllow: /\n")
    crawling = Deferred.fromCoroutine(
        crawl(pages(site, 2) + pages(other_site, 1), CONCURRENT_REQUESTS=1, **THROTTLE)
    )
    crawling.addTimeout(20, reactor)  # a hang fails the test (TimeoutError)
    crawler = await crawling
    assert len(crawler.spider.seen) == 3


async def crawl_slow_and_fast_in_arrival_order(site, other_site, delay, slow, fast, **settings):
    """*slow* pages of *site* (Crawl-delay *delay*) interleaved with *fast* pages of
    *other_site* (no delay, another slot), two places for the whole crawl, taken in
    the order they came (as scrapy-redis's queues give them; Scrapy's default queue
    prefers idle slots).  Returns the page starts of each site, as the sites saw them."""
    robots(site, f"User-agent: *\nCrawl-delay: {delay}\n".encode())
    robots(other_site, b"User-agent: *\nAllow: /\n")
    other_url = other_site.url.replace("127.0.0.1", "localhost")
    fast_urls = [url.replace(other_site.url, other_url) for url in pages(other_site, fast)]
    urls = [url for pair in itertools.zip_longest(pages(site, slow), fast_urls) for url in pair]
    await crawl(
        [url for url in urls if url],
        **{
            "CONCURRENT_REQUESTS": 2,
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
            "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
            **THROTTLE,
            **settings,
        },
    )
    return [
        [hit.time for hit in each.hits if hit.path.startswith("/p/")] for each in (site, other_site)
    ]


@pytest_twisted.ensureDeferred
async def test_requests_waiting_for_a_crawl_delay_leave_the_other_hosts_their_concurrency(
    site, other_site
):
    """Without the throttle leaving its waiting requests out, the slow site's two
    pages would hold both places until the first leaves, 1.5 s after robots.txt, and
    the other site would wait with them."""
    slow, fast = await crawl_slow_and_fast_in_arrival_order(site, other_site, 1.5, 2, 12)
    assert len(slow) == 2 and len(fast) == 12
    assert slow[1] - slow[0] >= 1.45
    # Most go while the slow site's first page waits its turn (holding the places,
    # one at most would); a count, so that a loaded machine cannot fail it.
    assert sum(start < slow[0] for start in fast) >= 6


@pytest_twisted.ensureDeferred
async def test_the_live_view_says_what_the_units_wait_for_and_is_off_with_one_setting(site, caplog):
    robots(site, b"User-agent: *\nCrawl-delay: 1\n")
    settings = {"ADDONS": {"scrapy_rfc9309.Addon": 500}, "LOGSTATS_INTERVAL": 0.4}
    with caplog.at_level(logging.INFO):
        crawler = await crawl(pages(site, 3), **settings)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Politeness:")]
    assert lines, "no live view line"
    # A page waited for its Crawl-delay while the others were queued.
    assert any("1 waiting for a Crawl-delay" in line for line in lines), lines
    assert crawler.stats.get_value("crawldelay/units_spaced") is not None
    caplog.clear()
    with caplog.at_level(logging.INFO):
        await crawl(pages(site, 2), CRAWLDELAY_LIVE_VIEW=False, **settings)
    assert not [r for r in caplog.records if r.getMessage().startswith("Politeness:")]


@pytest_twisted.ensureDeferred
async def test_a_learnt_delay_is_logged_with_the_floor_it_makes(site, caplog):
    """A Crawl-delay shorter than ``DOWNLOAD_DELAY``: the line says the floor that
    holds (the longer), and what the file asked."""
    robots(site, b"User-agent: *\nCrawl-delay: 0.2\n")
    caplog.set_level(logging.DEBUG, logger="scrapy_rfc9309.extensions.crawldelay")
    await crawl(pages(site, 1), ADDONS={"scrapy_rfc9309.Addon": 500}, DOWNLOAD_DELAY=0.5)
    assert (
        f"127.0.0.1: at least 0.5 s from one request's end to the next ({site.url} asks for 0.2 s)"
        in caplog.messages
    )


#: Scrapy's queues and the add-on's, each with the limits it takes.
QUEUES = (
    "scrapy_rfc9309.pqueues.HostReadyPriorityQueue",
    "scrapy.pqueues.ScrapyPriorityQueue",
    "scrapy.pqueues.DownloaderAwarePriorityQueue",
)
PER_IP_DEPRECATED = pytest.mark.filterwarnings(
    "ignore:The CONCURRENT_REQUESTS_PER_IP setting is deprecated"
)
LIMITS = {
    "per-domain-1": (1, {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}),
    "per-domain-2": (2, {"CONCURRENT_REQUESTS_PER_DOMAIN": 2}),
    # Scrapy gives every slot CONCURRENT_REQUESTS_PER_IP instead, when it is set
    # (DownloaderAwarePriorityQueue refuses it; Scrapy 2.19 deprecates it, and
    # still honours it).
    "per-ip-1": (1, {"CONCURRENT_REQUESTS_PER_DOMAIN": 4, "CONCURRENT_REQUESTS_PER_IP": 1}),
}


@pytest.mark.parametrize(
    ("queue", "per_host", "limits"),
    [
        pytest.param(
            queue, *limits, id=f"{queue.rsplit('.', 1)[1]}-{name}", marks=PER_IP_DEPRECATED
        )
        for queue in QUEUES
        for name, limits in LIMITS.items()
        if not (name == "per-ip-1" and queue.endswith("DownloaderAwarePriorityQueue"))
    ],
)
@pytest_twisted.ensureDeferred
async def test_a_host_without_a_floor_never_gets_more_requests_at_once_than_its_concurrency(
    site, queue, per_host, limits
):
    """Scrapy's download slot sends every request queued in it at once (2.15 to 2.19:
    five pages of one host, CONCURRENT_REQUESTS_PER_DOMAIN = 1, released together by
    the robots middleware, reach the site within 10 ms); the gate lets a unit have no
    more requests in progress than its slot's concurrency, whatever the queue.  Each
    page takes 0.5 s to answer, so a page starts no sooner than 0.5 s after the one
    ``per_host`` places before it."""
    robots(site, b"User-agent: *\nAllow: /\n")
    for number in range(6):
        site.route(f"/p/{number}", body=b"<html></html>", delay=0.5)
    crawler = await crawl(
        pages(site, 6),
        ADDONS={"scrapy_rfc9309.Addon": 500},
        SCHEDULER_PRIORITY_QUEUE=queue,
        **limits,
    )
    assert len(crawler.spider.seen) == 6
    starts = sorted(hit.time for hit in site.hits if hit.path.startswith("/p/"))
    apart = [later - earlier for earlier, later in zip(starts, starts[per_host:], strict=False)]
    assert min(apart) >= 0.5


@pytest_twisted.ensureDeferred
async def test_a_busy_hosts_expired_robots_txt_is_fetched_again_while_its_pages_flow(site):
    """A host without a Crawl-delay, two of its pages always on the wire: its
    robots.txt, expired (``RFC9309_CACHE_TTL = 0.5``), is fetched again, the pages
    after it waiting for it.  Its expired copy is obeyed a while longer only while a
    hold or a Crawl-delay would keep the request waiting: a request on the wire ends
    without it (put off while the unit was busy, the file was never fetched again)."""
    robots(site, b"User-agent: *\nAllow: /\n")
    for number in range(16):
        site.route(f"/p/{number}", body=b"page", delay=0.3)
    await crawl(
        pages(site, 16),
        ADDONS={"scrapy_rfc9309.Addon": 500},
        RFC9309_CACHE_TTL=0.5,
        CONCURRENT_REQUESTS_PER_DOMAIN=2,
    )
    assert site.count("/robots.txt") >= 2, site.paths()
    assert len([path for path in site.paths() if path.startswith("/p/")]) == 16
