"""Politeness as the sites see it, under a broad crawl: hundreds of hosts, each with a
Crawl-delay, crawled at once with the add-on, and every gap between two requests to
one host measured on the server's clock (lower bounds only)."""

import pytest
import pytest_twisted

from tests.broad_site import BroadSite, addresses, robots_and_pages
from tests.crawl import ListSpider, crawl

HOSTS = 200
PAGES = 3
CRAWL_DELAY = 0.5


respond = robots_and_pages(f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\nDisallow: /private\n")


@pytest.fixture
def broad_site():
    site = BroadSite(addresses(HOSTS), respond, page_time=0.05)
    yield site
    site.close()


#: The scheduler's priority queues users run: the add-on's, Scrapy's default, and the
#: one Scrapy recommends for broad crawls.
QUEUES = {
    "package-queue": "scrapy_rfc9309.pqueues.HostReadyPriorityQueue",
    "scrapys-queue": "scrapy.pqueues.ScrapyPriorityQueue",
    "downloader-aware-queue": "scrapy.pqueues.DownloaderAwarePriorityQueue",
}


async def broad_crawl(urls, queue, **settings):
    """The add-on's crawl of *urls* with scheduler queue *queue* (a key of
    :data:`QUEUES`), 64 requests at once, 2 a host unless *settings* say otherwise."""
    return await crawl(
        urls,
        **{
            "ADDONS": {"scrapy_rfc9309.Addon": 500},
            "SCHEDULER_PRIORITY_QUEUE": QUEUES[queue],
            "CONCURRENT_REQUESTS": 64,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
            "LOG_LEVEL": "WARNING",
            **settings,
        },
    )


@pytest.mark.parametrize("queue", list(QUEUES))
@pytest_twisted.ensureDeferred
async def test_no_host_sees_two_requests_closer_than_its_crawl_delay_robots_txt_included(
    broad_site, queue
):
    """RFC 9309 leaves Crawl-delay's meaning open; the throttle spaces end to start,
    so the gap between two arrivals at a host is at least the Crawl-delay plus the
    first one's response time (50 ms a page), whichever queue the scheduler uses.
    Nor do the sites, together, ever see more pages in progress than
    CONCURRENT_REQUESTS."""
    urls = [
        broad_site.url(host, f"/p/{number}") for number in range(PAGES) for host in broad_site.hosts
    ]
    urls += [broad_site.url(host, "/private/x") for host in broad_site.hosts[:20]]
    crawler = await broad_crawl(urls, queue)
    assert crawler.settings["SCHEDULER_PRIORITY_QUEUE"] == QUEUES[queue]
    gaps = broad_site.gaps()
    assert len(gaps) == HOSTS * PAGES  # robots.txt, then each page: no disallowed one
    short = sorted(gap for gap in gaps if gap[0] < CRAWL_DELAY)
    assert short == [], f"{len(short)} of {len(gaps)} gaps short, shortest {short[:3]}"
    assert crawler.stats.get_value("rfc9309/forbidden") == 20
    assert len(crawler.spider.seen) == HOSTS * PAGES
    assert broad_site.most_pages <= 64


class OldStyleSpider(ListSpider):
    """Asks for its delay with Scrapy's ``download_delay`` spider attribute."""

    name = "old-style"
    download_delay = CRAWL_DELAY


@pytest.mark.filterwarnings("ignore:The 'download_delay' spider attribute is deprecated")
@pytest_twisted.ensureDeferred
async def test_a_spiders_download_delay_attribute_spaces_every_host():
    """Hundreds of hosts whose robots.txt asks for no delay, the spider's
    ``download_delay`` attribute the only one: no gap at any host below it, robots.txt
    included (Scrapy before 2.19 reads the attribute in its downloader only, whose
    jitter alone spaced requests by half of it)."""
    site = BroadSite(addresses(HOSTS, first=1800), robots_and_pages("User-agent: *\nAllow: /\n"))
    try:
        urls = [site.url(host, f"/p/{number}") for number in range(PAGES) for host in site.hosts]
        crawler = await crawl(
            urls,
            spider=OldStyleSpider,
            ADDONS={"scrapy_rfc9309.Addon": 500},
            CONCURRENT_REQUESTS=64,
            LOG_LEVEL="WARNING",
        )
    finally:
        site.close()
    gaps = site.gaps()
    assert len(gaps) == HOSTS * PAGES
    short = sorted(gap for gap in gaps if gap[0] < CRAWL_DELAY)
    assert short == [], f"{len(short)} of {len(gaps)} gaps short, shortest {short[:3]}"
    assert len(crawler.spider.seen) == HOSTS * PAGES


@pytest_twisted.ensureDeferred
async def test_requests_that_waited_for_their_hosts_take_a_place_of_concurrent_requests_to_start():
    """Requests waiting in the downloader for their host's Crawl-delay are left out of
    CONCURRENT_REQUESTS, so that they hold no place; the first pages of 80 hosts wait
    so, their floors passing within moments of each other: to start, each must take
    a place, and the sites never have more pages in progress than places."""
    site = BroadSite(addresses(80), respond, page_time=0.2)
    try:
        urls = [site.url(host, f"/p/{number}") for number in range(2) for host in site.hosts]
        crawler = await crawl(
            urls, ADDONS={"scrapy_rfc9309.Addon": 500}, CONCURRENT_REQUESTS=6, LOG_LEVEL="WARNING"
        )
    finally:
        site.close()
    assert len(crawler.spider.seen) == 160
    assert site.most_pages <= 6


@pytest.mark.parametrize(
    ("queue", "limits"),
    [
        *((queue, {}) for queue in QUEUES),
        # Scrapy gives every slot CONCURRENT_REQUESTS_PER_IP when it is set
        # (DownloaderAwarePriorityQueue refuses it; Scrapy 2.19 deprecates it).
        pytest.param(
            "scrapys-queue",
            {"CONCURRENT_REQUESTS_PER_DOMAIN": 8, "CONCURRENT_REQUESTS_PER_IP": 2},
            id="scrapys-queue-per-ip",
            marks=pytest.mark.filterwarnings(
                "ignore:The CONCURRENT_REQUESTS_PER_IP setting is deprecated"
            ),
        ),
    ],
)
@pytest_twisted.ensureDeferred
async def test_no_host_without_a_floor_gets_more_requests_at_once_than_its_concurrency(
    queue, limits
):
    """Hundreds of hosts without a Crawl-delay, 4 pages each answered in 0.2 s: on
    every host's own count, never more pages in progress at once than its slot's
    concurrency (2, per domain or per IP), whichever queue (Scrapy's download slot
    sends every request queued in it at once)."""
    respond_allow = robots_and_pages("User-agent: *\nAllow: /\n")
    site = BroadSite(addresses(200, first=1500), respond_allow, page_time=0.2)
    try:
        # A host's pages one after another: they come to it together.
        urls = [site.url(host, f"/p/{number}") for host in site.hosts for number in range(4)]
        crawler = await broad_crawl(urls, queue, **limits)
    finally:
        site.close()
    assert len(crawler.spider.seen) == 800
    assert site.most_per_host <= 2


def answering_429_first(retry_after: int) -> BroadSite:
    """Every host answers its first page request 429 with ``Retry-After``."""
    answered: set[str] = set()

    def respond_429_first(host, path, headers):
        if path.startswith("/robots"):  # its own file, or one another site's redirects to
            return 200, {}, b"User-agent: *\nAllow: /\n"
        if host not in answered:
            answered.add(host)
            return 429, {"Retry-After": str(retry_after)}, b""
        return 200, {"Content-Type": "text/html"}, b"<html><body>page</body></html>"

    return BroadSite(addresses(HOSTS, first=400), respond_429_first)


def quiet_after_429(site: BroadSite) -> list[float]:
    """On each host's clock, the seconds from its first page request (answered 429)
    to its next request of any kind, robots.txt included."""
    quiet = []
    for hits in site.arrivals.values():
        hits = sorted(hits)
        first_page = next(i for i, (_, path) in enumerate(hits) if path.startswith("/p/"))
        if first_page + 1 < len(hits):
            quiet.append(hits[first_page + 1][0] - hits[first_page][0])
    return quiet


@pytest.fixture
def slow_down_site():
    site = answering_429_first(1)
    yield site
    site.close()


@pytest.mark.parametrize(
    "queue, per_host, autothrottle",
    [
        ("package-queue", 2, False),
        ("downloader-aware-queue", 1, False),
        ("downloader-aware-queue", 4, True),
    ],
)
@pytest_twisted.ensureDeferred
async def test_no_host_that_answered_429_gets_a_request_before_its_retry_after(
    slow_down_site, queue, per_host, autothrottle
):
    """Hundreds of hosts each asking for a pause at once, Scrapy's RetryMiddleware on:
    on every host's own clock, nothing arrives within the second after its 429, with
    the add-on's queue or Scrapy's broad-crawl one.  The add-on's queue sends a new
    host one request at a time until one is done; Scrapy's sends a host as many as
    CONCURRENT_REQUESTS_PER_DOMAIN, so it runs with one: every request after the
    first is then sent after the answer before it came back (a second request sent
    with the first could reach the site after its 429).  Requests beyond a host's
    concurrency wait in the gate, not in Scrapy's download slot, where the 429's
    hold would not stop them; with AutoThrottle on (whose delay keeps requests in
    that slot), a host without a floor has one request at a time."""
    site = slow_down_site
    # A host's pages one after another: they come to it together.
    urls = [site.url(host, f"/p/{number}") for host in site.hosts for number in range(PAGES)]
    crawler = await broad_crawl(
        urls,
        queue,
        RETRY_ENABLED=True,
        BACKOFF_DELAY=0.1,
        CONCURRENT_REQUESTS_PER_DOMAIN=per_host,
        AUTOTHROTTLE_ENABLED=autothrottle,
        AUTOTHROTTLE_START_DELAY=0.2,
    )
    quiet = quiet_after_429(site)
    assert len(quiet) == HOSTS
    short = sorted(gap for gap in quiet if gap < 1.0)
    assert short == [], f"{len(short)} of {HOSTS} hosts got a request within 1 s of their 429"
    assert len(crawler.spider.seen) == HOSTS * PAGES  # every 429 retried after its hold
    assert crawler.stats.get_value("backoff/holds") == HOSTS


@pytest_twisted.ensureDeferred
async def test_no_host_held_longer_than_a_page_waits_has_its_expired_robots_txt_fetched():
    """Hundreds of hosts each ask for a 12-s pause, longer than a page waits in the
    gate (5 s), and their robots.txt expires meanwhile (``RFC9309_CACHE_TTL = 2``),
    with Scrapy's broad-crawl queue, which hands their pages out through the pause:
    the expired copy is obeyed while a robots.txt request would wait for the hold
    (a stop would wait with it), and on every host's clock nothing arrives,
    robots.txt included, within 12 s of its 429; every page is fetched after."""
    site = answering_429_first(12)
    try:
        urls = [site.url(host, f"/p/{number}") for host in site.hosts for number in range(PAGES)]
        crawler = await broad_crawl(
            urls,
            "downloader-aware-queue",
            RETRY_ENABLED=True,
            CONCURRENT_REQUESTS_PER_DOMAIN=1,
            RFC9309_CACHE_TTL=2,
        )
    finally:
        site.close()
    quiet = quiet_after_429(site)
    assert len(quiet) == HOSTS
    short = sorted(gap for gap in quiet if gap < 12.0)
    assert short == [], f"{len(short)} of {HOSTS} hosts got a request within 12 s of their 429"
    assert len(crawler.spider.seen) == HOSTS * PAGES
    # The pages in the downloader's places come back through the pause: their copy.
    assert crawler.stats.get_value("rfc9309/expired_copy_obeyed", 0) > 0


class FollowingSpider(ListSpider):
    """Follows the links of the pages it gets."""

    name = "following"

    def parse(self, response):
        self.seen.append(response.url)
        yield from response.follow_all(css="a", callback=self.parse)


@pytest_twisted.ensureDeferred
async def test_no_held_host_gets_a_request_of_a_port_whose_robots_txt_it_never_read():
    """Hundreds of hosts each ask for a 20-s pause (a 429 on one port); a page of
    another site, answered 2 s later, links to another port of each, whose
    robots.txt was never read, so no copy may be obeyed meanwhile.  With Scrapy's
    broad-crawl queue, that page goes back to the scheduler while its robots.txt
    request would wait for the hold (a stop would wait with it): on every host's
    clock, nothing arrives at either port, robots.txt included, within 20 s of its
    429, and every page of the other port is fetched after.  One request at a time
    per host, so that each request after the 429 was sent after its answer.  (The
    links must come more than 5 s before the hold's end for a page to go back: on
    a loaded machine, with a 12-s hold, none did in one run.)"""
    site = answering_429_first(20)
    other = BroadSite(site.hosts, robots_and_pages("User-agent: *\n"))

    def links(host, path, headers):
        if path == "/robots.txt":
            return 200, {}, b"User-agent: *\n"
        link = other.url(site.hosts[int(path.rsplit("/", 1)[1])], "/q")
        return 200, {"Content-Type": "text/html"}, f'<a href="{link}">q</a>'.encode()

    hubs = BroadSite(addresses(HOSTS, first=700), links, page_time=2.0)
    try:
        urls = [site.url(host, "/p/0") for host in site.hosts]
        urls += [hubs.url(hub, f"/links/{n}") for n, hub in enumerate(hubs.hosts)]
        crawler = await broad_crawl(
            urls,
            "downloader-aware-queue",
            spider=FollowingSpider,
            RETRY_ENABLED=True,
            CONCURRENT_REQUESTS=2 * HOSTS,
            CONCURRENT_REQUESTS_PER_DOMAIN=1,
        )
    finally:
        for each in (site, other, hubs):
            each.close()
    for host in site.hosts:  # both ports, on the host's clock
        site.arrivals[host] += [(when, f"other port {path}") for when, path in other.arrivals[host]]
    quiet = quiet_after_429(site)
    assert len(quiet) == HOSTS
    short = sorted(gap for gap in quiet if gap < 20.0)
    assert short == [], f"{len(short)} of {HOSTS} hosts got a request within 20 s of their 429"
    assert sum(url.endswith("/q") for url in crawler.spider.seen) == HOSTS
    assert crawler.stats.get_value("rfc9309/handed_back", 0) > 0


@pytest_twisted.ensureDeferred
async def test_no_robots_txt_redirected_to_a_held_hosts_file_is_asked_again_through_the_hold():
    """Hundreds of hosts (``www.`` sites) redirect their robots.txt (answered in
    2.5 s) to a file on another host each (their apex), which a 429 on its page has
    held for 12 s meanwhile: each fetch is put off at that hop, and goes on from it
    when the hold is about to end.  Every ``www.`` host sees its robots.txt asked
    once (put off and not remembered: once every 2.5 s through the hold; started
    again from its first request: twice), no apex gets a request within 12 s of its
    429, robots.txt hop included, and every page is fetched.  Scrapy's broad-crawl
    queue, one request at a time per host."""
    held = answering_429_first(12)
    apex = dict(zip(addresses(HOSTS, first=700), held.hosts, strict=True))

    def redirected(host, path, headers):
        if path == "/robots.txt":
            return 301, {"Location": held.url(apex[host], "/robots-www.txt")}, b""
        return 200, {"Content-Type": "text/html"}, b"<html><body>page</body></html>"

    www = BroadSite(list(apex), redirected, robots_time=2.5)
    try:
        urls = [held.url(host, "/p/0") for host in held.hosts]
        urls += [www.url(host, "/q") for host in www.hosts]
        crawler = await broad_crawl(
            urls,
            "downloader-aware-queue",
            RETRY_ENABLED=True,
            CONCURRENT_REQUESTS=2 * HOSTS,
            CONCURRENT_REQUESTS_PER_DOMAIN=1,
        )
    finally:
        for each in (held, www):
            each.close()
    asked = sorted(
        sum(path == "/robots.txt" for _, path in www.arrivals[host]) for host in www.hosts
    )
    assert asked == [1] * HOSTS, f"{sum(n > 1 for n in asked)} of {HOSTS} asked more than once"
    quiet = quiet_after_429(held)
    assert len(quiet) == HOSTS
    short = sorted(gap for gap in quiet if gap < 12.0)
    assert short == [], f"{len(short)} of {HOSTS} hosts got a request within 12 s of their 429"
    assert sum(url.endswith("/q") for url in crawler.spider.seen) == HOSTS
    assert crawler.stats.get_value("crawldelay/robots_put_off") > 0  # for some at least


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_two_crawls_of_one_process_sharing_a_fleet_redis_keep_every_hosts_crawl_delay(
    broad_site, fleet_redis
):
    """Two spiders of one process crawl the same 200 hosts at once, each its own pages:
    through ``FLEET_REDIS_URL`` they share every host's spacing and robots.txt, so no
    host sees two requests closer than its Crawl-delay, whichever crawl sent them."""
    from twisted.internet.defer import DeferredList, ensureDeferred

    both = [
        ensureDeferred(
            broad_crawl(
                [
                    broad_site.url(host, f"/{name}/{n}")
                    for n in range(2)
                    for host in broad_site.hosts
                ],
                "package-queue",
                FLEET_REDIS_URL=fleet_redis,
            )
        )
        for name in "ab"
    ]
    await DeferredList(both, fireOnOneErrback=True)
    robots = [
        path for hits in broad_site.arrivals.values() for _, path in hits if path == "/robots.txt"
    ]
    assert len(robots) == HOSTS  # one fetch a host, for both crawls
    pages = sum(path != "/robots.txt" for hits in broad_site.arrivals.values() for _, path in hits)
    assert pages == HOSTS * 4
    short = [gap for gap in broad_site.gaps() if gap[0] < CRAWL_DELAY]
    assert short == [], short[:5]
