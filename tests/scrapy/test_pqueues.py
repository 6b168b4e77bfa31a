"""The add-on's scheduler queue (scrapy_rfc9309.pqueues) in real crawls: a floored
host's requests wait in the scheduler, not in the downloader, and the engine gets
them in time without being woken."""

import itertools
import weakref

import pytest
import pytest_twisted
import scrapy
from scrapy.core.engine import ExecutionEngine
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from scrapy_rfc9309.budget.storage import MemoryStorage
from tests.broad_site import BroadSite, addresses, robots_and_pages
from tests.crawl import SlotOccupancy, crawl
from tests.helpers import policy
from tests.scheduler_held import SchedulerHeld

ADDON = {"ADDONS": {"scrapy_rfc9309.Addon": 500}}
ADDON_QUEUE = "scrapy_rfc9309.pqueues.HostReadyPriorityQueue"
SCRAPYS_QUEUE = "scrapy.pqueues.DownloaderAwarePriorityQueue"


def pages(site, count):
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.3\n")
    return [f"{site.url}/p/{n}" for n in range(count)]


@pytest_twisted.ensureDeferred
async def test_a_floored_hosts_requests_wait_in_the_scheduler_not_in_the_downloader(
    site, other_site
):
    extensions = {"EXTENSIONS": {SlotOccupancy: 0}}
    crawler = await crawl(pages(site, 6), CONCURRENT_REQUESTS_PER_DOMAIN=8, **extensions, **ADDON)
    assert len(crawler.spider.seen) == 6
    assert crawler.stats.get_value("test/slot_active_max") == 1  # robots.txt, then one page
    # No page went before the floor was known: the first waited in the scheduler
    # while robots.txt was read.
    assert crawler.stats.get_value("crawldelay/requeued") is None
    assert crawler.stats.get_value("crawldelay/robots_read_ahead") == 1
    # Scrapy's default queue hands them all out at once: the gate hands those that
    # are not ready back to the scheduler, rather than let them hold places.
    scrapys = await crawl(
        pages(other_site, 6),
        CONCURRENT_REQUESTS_PER_DOMAIN=8,
        SCHEDULER_PRIORITY_QUEUE="scrapy.pqueues.DownloaderAwarePriorityQueue",
        **extensions,
        **ADDON,
    )
    assert len(scrapys.spider.seen) == 6
    assert scrapys.stats.get_value("test/slot_active_max") == 1
    assert scrapys.stats.get_value("crawldelay/requeued") > 1


@pytest_twisted.ensureDeferred
async def test_a_crawl_goes_on_without_the_engines_heartbeat(site, monkeypatch):
    """Scrapy's engine asks the scheduler again when a request ends, and every 5 s:
    with that heartbeat an hour, a crawl that waits for a Crawl-delay would hang
    unless the queue hands the next request out before its host is ready, when no
    other is, to wait its time in the gate (a generous guard, not a timing claim)."""
    monkeypatch.setattr(ExecutionEngine, "_SLOT_HEARTBEAT_INTERVAL", 3600)
    crawling = Deferred.fromCoroutine(crawl(pages(site, 4), **ADDON))
    crawler = await crawling.addTimeout(60, reactor)
    assert len(crawler.spider.seen) == 4
    starts = [hit.time for hit in site.hits]
    assert all(b - a >= 0.3 for a, b in itertools.pairwise(starts))


@pytest_twisted.ensureDeferred
async def test_a_jobdir_crawl_stopped_and_started_again_resumes_from_its_disk_queue(site, tmp_path):
    urls = pages(site, 6)
    resumable = {"JOBDIR": str(tmp_path / "job"), **ADDON}
    first = await crawl(urls, CLOSESPIDER_PAGECOUNT=2, **resumable)
    assert first.stats.get_value("finish_reason") == "closespider_pagecount"
    # The disk queue is peeked at: robots.txt is read while the pages stay on disk.
    assert first.stats.get_value("crawldelay/robots_read_ahead") == 1
    second = await crawl([], **resumable)  # no start URLs: only what the disk queue kept
    assert second.stats.get_value("scheduler/dequeued/disk") >= 1
    assert second.stats.get_value("crawldelay/robots_read_ahead") == 1
    assert second.spider.seen
    assert not set(first.spider.seen) & set(second.spider.seen)  # nothing fetched twice


@pytest_twisted.ensureDeferred
async def test_a_jobdir_crawl_leaves_the_folders_scrapys_own_queue_leaves(site, tmp_path):
    """A host's folder goes with its last request where Scrapy's queue removes it
    (Scrapy 2.19); an older Scrapy's disk queues leave their files, and the folder."""
    left = {}
    for queue in ("scrapy.pqueues.DownloaderAwarePriorityQueue", ADDON_QUEUE):
        jobdir = tmp_path / queue
        settings = {**ADDON, "JOBDIR": str(jobdir), "SCHEDULER_PRIORITY_QUEUE": queue}
        await crawl(pages(site, 4), CLOSESPIDER_PAGECOUNT=2, **settings)
        await crawl([], **settings)
        left[queue] = sorted(path.name for path in (jobdir / "requests.queue").iterdir())
    assert left[ADDON_QUEUE] == left["scrapy.pqueues.DownloaderAwarePriorityQueue"]
    if scrapy.version_info >= (2, 19):
        assert left[ADDON_QUEUE] == ["active.json"]


@pytest_twisted.ensureDeferred
async def test_without_the_throttle_the_queue_hands_every_request_out(site):
    """Named by hand with the throttle off, no gate sees requests end: the queue
    counts none out (else a host's first request, never seen ending, would hold its
    host for good and the crawl would hang: a generous guard, not a timing claim)."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    crawling = Deferred.fromCoroutine(
        crawl(
            [f"{site.url}/p/{n}" for n in range(6)],
            SCHEDULER_PRIORITY_QUEUE=ADDON_QUEUE,
            CONCURRENT_REQUESTS_PER_DOMAIN=1,
        )
    )
    crawler = await crawling.addTimeout(60, reactor)
    assert len(crawler.spider.seen) == 6


class EarlyRequests:
    """An extension that keeps, in ``test/early_max``, the most requests the queue had
    handed out before their unit was ready, waiting in the gate at once."""

    def __init__(self, crawler):
        from twisted.internet.task import LoopingCall

        from scrapy_rfc9309.extensions.crawldelay._politeness import politeness

        self.stats, self.politeness = crawler.stats, politeness(crawler)
        self.call = LoopingCall(self.sample)
        crawler.signals.connect(self.opened, signal=scrapy.signals.spider_opened)
        crawler.signals.connect(self.closed, signal=scrapy.signals.spider_closed)

    def opened(self):
        self.call.start(0.01)

    def closed(self):
        self.call.stop()

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def sample(self):
        self.stats.max_value("test/early_max", len(self.politeness.early))


@pytest_twisted.ensureDeferred
async def test_requests_handed_out_early_never_fill_the_downloader():
    """At most half of CONCURRENT_REQUESTS wait in the gate for their unit: a full
    downloader has Scrapy read every start request into the scheduler."""
    respond = robots_and_pages("User-agent: *\nCrawl-delay: 0.5\n")
    site = BroadSite(addresses(12, first=1200), respond)
    try:
        urls = [site.url(host, f"/p/{n}") for n in range(3) for host in site.hosts]
        crawler = await crawl(urls, CONCURRENT_REQUESTS=4, EXTENSIONS={EarlyRequests: 0}, **ADDON)
    finally:
        site.close()
    assert len(crawler.spider.seen) == 36
    assert 1 <= crawler.stats.get_value("test/early_max") <= 2


@pytest_twisted.ensureDeferred
async def test_the_requests_a_robots_txt_refuses_go_at_once_and_the_others_keep_their_order(
    site, other_site
):
    """One host, two authorities (two ports of 127.0.0.1): the site's robots.txt allows
    everything with a Crawl-delay, the other's answers 500 (unreachable: it refuses
    every page).  With Scrapy's breadth-first recipe (FIFO queues), the refused
    requests are handed out at once, and the allowed ones reach the site in the
    order they were scheduled (the unit's queue was emptied and refilled, which
    reversed it)."""
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.2\n")
    other_site.route("/robots.txt", status=500)
    urls = []
    for n in range(5):
        urls += [f"{site.url}/p/{n}", f"{other_site.url}/q/{n}"]
    crawler = await crawl(urls, SCHEDULER_MEMORY_QUEUE="scrapy.squeues.FifoMemoryQueue", **ADDON)
    pages = [hit.path for hit in site.hits if hit.path != "/robots.txt"]
    assert sorted(pages) == [f"/p/{n}" for n in range(5)]
    # The first page went before the floor was known, and was handed back: last.
    assert [page for page in pages if page != "/p/0"] == [f"/p/{n}" for n in range(1, 5)]
    assert other_site.paths() == ["/robots.txt"]
    assert crawler.stats.get_value("rfc9309/forbidden") == 5


class RobotsWaits:
    """Downloader middlewares around the robots middleware (100): the most pages
    waiting in it (for their site's robots.txt) when a robots.txt response came, in
    ``test/robots_waits_max``."""

    def __init__(self, crawler, entering):
        self.stats = crawler.stats
        self.entering = entering

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler, cls is EnteringRobots)

    def waiting(self):
        return WAITING.setdefault(self.stats, set())

    def process_request(self, request, spider=None):
        if not request.meta.get("rfc9309_robots"):
            (self.waiting().add if self.entering else self.waiting().discard)(request)

    def process_response(self, request, response, spider=None):
        if request.meta.get("rfc9309_robots"):
            self.stats.max_value("test/robots_waits_max", len(self.waiting()))
        return response

    def process_exception(self, request, exception, spider=None):
        self.waiting().discard(request)


class EnteringRobots(RobotsWaits):
    pass


#: The pages between the two middlewares, by crawl (its stats).
WAITING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@pytest.mark.parametrize(
    ("queue", "waits"),
    [(ADDON_QUEUE, False), ("scrapy.pqueues.DownloaderAwarePriorityQueue", True)],
)
@pytest_twisted.ensureDeferred
async def test_pages_wait_for_their_robots_txt_in_the_scheduler_not_the_downloader(queue, waits):
    """24 hosts whose robots.txt takes 0.5 s to come, 2 pages each, 8 places: with the
    add-on's queue each robots.txt is read while the host's pages stay in the
    scheduler, so no place is held by a page waiting for it, and the other hosts'
    pages go meanwhile; with Scrapy's queue, pages fill places waiting."""
    site = BroadSite(addresses(24), lambda host, path, headers: (200, {}, b""), robots_time=0.5)
    try:
        urls = [site.url(host, f"/p/{number}") for host in site.hosts for number in range(2)]
        crawler = await crawl(
            urls,
            ADDONS={"scrapy_rfc9309.Addon": 500},
            SCHEDULER_PRIORITY_QUEUE=queue,
            CONCURRENT_REQUESTS=8,
            DOWNLOADER_MIDDLEWARES={EnteringRobots: 99, RobotsWaits: 101},
            LOG_LEVEL="WARNING",
        )
    finally:
        site.close()
    assert len(crawler.spider.seen) == 48
    assert (
        sum(1 for hits in site.arrivals.values() for _, path in hits if path == "/robots.txt") == 24
    )
    most = crawler.stats.get_value("test/robots_waits_max", 0)
    assert (most > 0) if waits else most == 0


async def most_held(site, urls, queue, **settings):
    """The most requests the scheduler held at once in a crawl of *urls* of the broad
    *site* with *queue*, once every page came."""
    try:
        crawler = await crawl(
            urls,
            SCHEDULER_PRIORITY_QUEUE=queue,
            EXTENSIONS={SchedulerHeld: 0},
            LOG_LEVEL="WARNING",
            **settings,
            **ADDON,
        )
    finally:
        site.close()
    assert len(crawler.spider.seen) == len(urls)
    return crawler.stats.get_value("test/scheduler_held_max")


@pytest.mark.parametrize(("queue", "paced"), [(ADDON_QUEUE, True), (SCRAPYS_QUEUE, False)])
@pytest_twisted.ensureDeferred
async def test_a_broad_crawls_start_requests_are_read_as_the_robots_txt_reads_take_them(
    queue, paced
):
    """200 hosts, one start page each, robots.txt 0.1 s to come, 8 places (4 reads at
    once): with the add-on's queue, Scrapy reads a start request only while fewer
    hosts than that wait for their read, so the scheduler never holds the crawl's
    start requests; Scrapy's own queue gets them all early, as Scrapy documents."""
    site = BroadSite(addresses(200), lambda host, path, headers: (200, {}, b""), robots_time=0.1)
    urls = [site.url(host, "/p") for host in site.hosts]
    held = await most_held(site, urls, queue, CONCURRENT_REQUESTS=8)
    assert (held <= 12) if paced else held > 100


@pytest.mark.parametrize(("queue", "paced"), [(ADDON_QUEUE, True), (SCRAPYS_QUEUE, False)])
@pytest_twisted.ensureDeferred
async def test_start_requests_wait_while_the_downloader_is_full(queue, paced):
    """8 hosts, 5 start pages each, 0.2 s a page, 4 places, robots.txt not obeyed (no
    read to wait for): with the add-on's queue a start request is read only when the
    downloader has room (Scrapy's documented lazy start), so the scheduler holds a
    few of them; Scrapy's own queue gets them all while the downloader is full."""
    site = BroadSite(addresses(8), lambda host, path, headers: (200, {}, b""), page_time=0.2)
    urls = [site.url(host, f"/p/{n}") for n in range(5) for host in site.hosts]
    held = await most_held(site, urls, queue, CONCURRENT_REQUESTS=4, ROBOTSTXT_OBEY=False)
    assert (held <= 6) if paced else held > 30


@pytest_twisted.ensureDeferred
async def test_an_expired_robots_txt_is_read_again_while_the_pages_wait_in_the_scheduler(site):
    """robots.txt kept for 1 s (``RFC9309_CACHE_TTL``), pages 0.5 s apart: the copy
    expires mid-crawl, and each fetch of it, the first and the later ones, is read
    ahead by the queue while the host's next page stays queued."""
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.5\n")
    urls = [f"{site.url}/p/{n}" for n in range(6)]
    crawler = await crawl(urls, RFC9309_CACHE_TTL=1, RFC9309_PERSISTENT_CACHE=False, **ADDON)
    assert len(crawler.spider.seen) == 6
    fetches = site.paths().count("/robots.txt")
    assert fetches >= 2
    assert crawler.stats.get_value("crawldelay/robots_read_ahead") == fetches
    starts = [hit.time for hit in site.hits]  # robots.txt spaced like the pages
    assert all(b - a >= 0.5 for a, b in itertools.pairwise(starts))


class EverySpent(MemoryStorage):
    """A budget storage, answering at once, in which every domain spent its pages today."""

    @classmethod
    def from_settings(cls, settings):
        return cls()

    def counts(self, key, day):
        return 0, 1


@pytest_twisted.ensureDeferred
async def test_reads_ahead_that_fetch_nothing_let_every_waiting_host_go_in_turn():
    """300 hosts whose budgets are spent (a storage that answers at once) and 4 places,
    so 2 robots.txt reads ahead at a time: each read ends without a fetch (the budget
    drops the host's pages: no robots.txt is worth fetching), and each one ended starts
    the next waiting host's.  Every host is read once, the crawl ends, and no site
    sees a request."""
    site = BroadSite(addresses(300), robots_and_pages("User-agent: *\nAllow: /\n"))
    try:
        urls = [site.url(host, f"/p/{number}") for host in site.hosts for number in range(2)]
        crawler = await crawl(
            urls,
            ADDONS={"scrapy_rfc9309.Addon": 500},
            CONCURRENT_REQUESTS=4,
            DOMAINBUDGET_ENABLED=True,
            DOMAINBUDGET_POLICY=policy(pages=1),
            DOMAINBUDGET_STORAGE=EverySpent,
            LOG_LEVEL="WARNING",
        )
    finally:
        site.close()
    assert sum(len(hits) for hits in site.arrivals.values()) == 0
    assert crawler.stats.get_value("domainbudget/dropped") == 600
    assert crawler.stats.get_value("crawldelay/robots_read_ahead") == 300
    assert crawler.stats.get_value("finish_reason") == "finished"
