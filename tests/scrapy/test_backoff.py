"""Backing off in real crawls: a site that answers 429 or 503 gets no request until
its hold ends, as the site's own request log shows (lower bounds only)."""

from __future__ import annotations

import asyncio
import logging
import time
from email.utils import formatdate

import pytest
import pytest_twisted
import scrapy

from scrapy_rfc9309._settings import SettingError
from tests.crawl import ListSpider, crawl
from tests.server import Route, refused_port

#: The add-on, with Scrapy's RetryMiddleware on (it retries 429 and 503 at once).
BACKOFF = {
    "ADDONS": {"scrapy_rfc9309.Addon": 500},
    "DOWNLOADER_MIDDLEWARES": {},
    "RETRY_ENABLED": True,
}


def pages(site, count=4):
    return [f"{site.url}/p/{number}" for number in range(count)]


def slow_down(status=429, retry_after=None):
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Route(status=status, headers=headers)


def quiet_after_each_slow_down(site):
    """For each "slow down" answer, the seconds until the site's next request (any
    path), as the site saw them; the last answer may have none after it."""
    hits = sorted(site.hits, key=lambda hit: hit.time)
    quiet = []
    for index, hit in enumerate(hits):
        if hit.status in (429, 503) and index + 1 < len(hits):
            quiet.append(hits[index + 1].time - hit.time)
    return quiet


def page_hits(site):
    return [hit for hit in site.hits if hit.path.startswith("/p/")]


@pytest_twisted.ensureDeferred
async def test_retry_after_holds_the_host_and_scrapys_retries_wait_and_other_hosts_go_on(
    site, other_site
):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/", slow_down(retry_after="3"), slow_down(retry_after="3"))
    other_site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    other_url = other_site.url.replace("127.0.0.1", "localhost")  # another host
    other_pages = [url.replace(other_site.url, other_url) for url in pages(other_site, 8)]
    crawler = await crawl(pages(site) + other_pages, BACKOFF_DELAY=0.2, **BACKOFF)

    quiet = quiet_after_each_slow_down(site)
    assert len(quiet) == 2
    assert min(quiet) >= 3.0
    assert len(crawler.spider.seen) == 12  # every page, the two answered 429 retried
    assert crawler.stats.get_value("backoff/holds") == 2
    assert crawler.stats.get_value("backoff/retry_after_max") == 3
    # The other host was not held: all its pages came before the held host's next
    # request (the first after its hold).
    hits = sorted(site.hits, key=lambda hit: hit.time)
    first_429 = next(index for index, hit in enumerate(hits) if hit.status == 429)
    resumed = hits[first_429 + 1].time
    assert all(hit.time < resumed for hit in page_hits(other_site))


@pytest.mark.parametrize(
    "rules, queue",
    [
        ("Crawl-delay: 0.2", "scrapy.pqueues.ScrapyPriorityQueue"),
        ("Allow: /", "scrapy.pqueues.ScrapyPriorityQueue"),
        ("Allow: /", "scrapy.pqueues.DownloaderAwarePriorityQueue"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_requests_scrapys_queues_hand_out_at_once_wait_for_the_hold_too(site, rules, queue):
    """Scrapy's own queues hand a host's pages to the downloader at once: with a
    Crawl-delay, one at a time passes the gate; without one, as many as its
    concurrency, the others waiting in the gate, not in the host's download slot
    (which would send the next one as the 429 comes back)."""
    site.route("/robots.txt", body=f"User-agent: *\n{rules}\n".encode())
    site.answer_first("/p/", slow_down(retry_after="2"))
    crawler = await crawl(
        pages(site), SCHEDULER_PRIORITY_QUEUE=queue, CONCURRENT_REQUESTS_PER_DOMAIN=1, **BACKOFF
    )
    assert len(crawler.spider.seen) == 4
    assert min(quiet_after_each_slow_down(site)) >= 2.0


@pytest.mark.parametrize(
    "queue", ["scrapy_rfc9309.pqueues.HostReadyPriorityQueue", "scrapy.pqueues.ScrapyPriorityQueue"]
)
@pytest_twisted.ensureDeferred
async def test_with_autothrottle_no_request_waits_in_scrapys_slot_through_a_hold(
    site, queue, caplog
):
    """AutoThrottle's delay keeps requests in Scrapy's download slot, past the gate:
    with its default target concurrency, a unit without a floor has one request in
    progress at a time, so none is waiting there when a 429 comes back (before, three
    pages came within 0.3 s of a 429 with ``Retry-After: 3``, with either queue)."""
    caplog.set_level(logging.INFO, logger="scrapy_rfc9309.extensions.crawldelay")
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    page = Route(body=b"<html></html>")
    site.answer_first("/p/", page, page, slow_down(retry_after="3"))
    crawler = await crawl(
        pages(site, 6),
        SCHEDULER_PRIORITY_QUEUE=queue,
        CONCURRENT_REQUESTS_PER_DOMAIN=4,
        AUTOTHROTTLE_ENABLED=True,
        AUTOTHROTTLE_START_DELAY=0.5,
        **BACKOFF,
    )
    assert len(crawler.spider.seen) == 6
    assert min(quiet_after_each_slow_down(site)) >= 3.0
    said = "AutoThrottle on: at most 1 request(s) at once to a host without a floor"
    assert said in caplog.text


@pytest_twisted.ensureDeferred
async def test_before_scrapy_alone_sends_requests_within_the_retry_after_window(site):
    """The "before" of the first test: Scrapy's own RetryMiddleware and scheduler
    against the same site."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/", slow_down(retry_after="3"), slow_down(retry_after="3"))
    await crawl(pages(site), RETRY_ENABLED=True)
    first = min(hit.time for hit in site.hits if hit.status == 429)
    within = sum(1 for hit in site.hits if first < hit.time < first + 3)
    print(f"Scrapy alone: {within} requests within Retry-After: 3 s of the first 429")
    assert within >= 2  # at least the two retries


@pytest_twisted.ensureDeferred
async def test_the_http_date_form(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    # Written as the 429 is sent, 3 s ahead: whole seconds, so at least 2 s ahead.
    date = lambda: formatdate(time.time() + 3, usegmt=True)  # noqa: E731
    site.answer_first("/p/", slow_down(retry_after=date))
    # Short holds without Retry-After: only the date can make the 2 s.
    await crawl(pages(site, 2), BACKOFF_START=0.2, BACKOFF_DELAY=0.05, **BACKOFF)
    assert min(quiet_after_each_slow_down(site)) >= 1.99  # ms of clock reading aside


@pytest_twisted.ensureDeferred
async def test_without_retry_after_the_backoff_grows_with_each_incident(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/", *[slow_down(status=503)] * 3)
    crawler = await crawl(
        pages(site, 1), BACKOFF_START=0.4, BACKOFF_DELAY=0.05, RETRY_TIMES=3, **BACKOFF
    )
    quiet = quiet_after_each_slow_down(site)
    assert len(quiet) == 3
    assert quiet[0] >= 0.4 and quiet[1] >= 0.8 and quiet[2] >= 1.6
    assert crawler.spider.seen == pages(site, 1)
    assert crawler.stats.get_value("backoff/holds") == 3


@pytest_twisted.ensureDeferred
async def test_absurd_retry_after_values_are_capped_or_ignored_and_the_crawl_ends(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    absurd = [
        "1" + "0" * 30,
        "Fri, 31 Dec 9999 23:59:59 GMT",
        "-5",
        "soon",
        "Thu, 01 Jan 1970 00:00:00 GMT",
    ]
    site.answer_first("/p/", *[slow_down(retry_after=value) for value in absurd])
    crawler = await crawl(
        pages(site, 1),
        BACKOFF_MAX_RETRY_AFTER=1,
        BACKOFF_START=0.3,
        BACKOFF_MAX=0.3,
        RETRY_TIMES=5,
        **BACKOFF,
    )
    stats = crawler.stats
    assert crawler.spider.seen == pages(site, 1)
    assert stats.get_value("finish_reason") == "finished"
    assert stats.get_value("backoff/retry_after_capped") == 2
    assert stats.get_value("backoff/retry_after_ignored") == 3
    quiet = quiet_after_each_slow_down(site)
    assert quiet[0] >= 1 and quiet[1] >= 1  # capped, not forever
    assert min(quiet[2:]) >= 0.3  # ignored: the backoff without Retry-After


class TwoVisitsSpider(ListSpider):
    """Requests one page, then another after *pause* seconds."""

    name = "two_visits"

    async def start(self):
        yield scrapy.Request(self.urls[0], callback=self.parse, errback=self.failed)
        await asyncio.sleep(self.pause)
        yield scrapy.Request(self.urls[1], callback=self.parse, errback=self.failed)

    def failed(self, failure):
        pass


@pytest_twisted.ensureDeferred
async def test_a_robots_txt_answered_429_is_fetched_again_after_its_retry_after(site):
    site.answer_first("/robots.txt", slow_down(retry_after="1"))
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    crawler = await crawl(
        pages(site, 2), spider=TwoVisitsSpider, spider_kwargs={"pause": 1.5}, **BACKOFF
    )
    # The first page went while robots.txt was unreachable: disallowed (RFC 9309
    # §2.3.1.3); the second came after the Retry-After, not RFC9309_FAILURE_TTL.
    assert site.paths() == ["/robots.txt", "/robots.txt", "/p/1"]
    assert crawler.spider.seen == [f"{site.url}/p/1"]
    assert min(quiet_after_each_slow_down(site)) >= 1.0


@pytest_twisted.ensureDeferred
async def test_a_page_whose_unread_robots_txt_its_held_unit_puts_off_goes_back_then_is_fetched(
    site, other_site
):
    """A 429 with ``Retry-After: 12`` holds the unit 127.0.0.1; 1.5 s later comes a
    page of another authority of it (another port), whose robots.txt was never read.
    With Scrapy's queue, the page waits a few seconds, goes back to the scheduler
    rather than have its robots.txt request wait in the downloader through the hold,
    and once the hold ends, robots.txt is read and the page fetched: the crawl ends,
    and the other authority saw nothing within the hold."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.route("/p/0", status=429, headers={"Retry-After": "12"})
    crawler = await crawl(
        [f"{site.url}/p/0", f"{other_site.url}/p/1"],
        spider=TwoVisitsSpider,
        spider_kwargs={"pause": 1.5},
        SCHEDULER_PRIORITY_QUEUE="scrapy.pqueues.ScrapyPriorityQueue",
        **{**BACKOFF, "RETRY_ENABLED": False},
    )
    assert other_site.paths() == ["/robots.txt", "/p/1"]
    assert crawler.spider.seen == [f"{other_site.url}/p/1"]
    assert other_site.hits[0].time - site.hits[-1].time >= 12
    assert crawler.stats.get_value("rfc9309/handed_back") >= 1


@pytest.mark.parametrize(
    "queue", ["scrapy_rfc9309.pqueues.HostReadyPriorityQueue", "scrapy.pqueues.ScrapyPriorityQueue"]
)
@pytest_twisted.ensureDeferred
async def test_a_robots_txt_redirected_to_a_held_hosts_file_is_asked_again_only_near_the_hold_end(
    site, other_site, queue
):
    """localhost (another host, as an apex beside its ``www.``) answers its page 429
    with ``Retry-After: 12``; 127.0.0.1's robots.txt (answered in 1.5 s) redirects to
    a file on localhost, a hop that would wait through the hold.  The fetch is put
    off at that hop, and goes on from it when the hold is about to end: 127.0.0.1's
    robots.txt is asked once (with the put-off not remembered: every 1.5 s, its first
    request sent again and again; started again from its first request: twice),
    localhost sees nothing during its hold, and the page is fetched after."""
    allow = b"User-agent: *\nAllow: /\n"
    other = f"http://localhost:{other_site.port}"
    other_site.route("/robots.txt", body=allow)
    other_site.route("/p/0", status=429, headers={"Retry-After": "12"})
    other_site.route("/robots-b.txt", body=allow)
    site.route("/robots.txt", status=301, headers={"Location": f"{other}/robots-b.txt"}, delay=1.5)
    crawler = await crawl(
        [f"{other}/p/0", f"{site.url}/p/1"],
        SCHEDULER_PRIORITY_QUEUE=queue,
        **{**BACKOFF, "RETRY_ENABLED": False},
    )
    assert crawler.stats.get_value("finish_reason") == "finished"
    assert site.paths() == ["/robots.txt", "/p/1"]
    assert other_site.paths() == ["/robots.txt", "/p/0", "/robots-b.txt"]
    assert quiet_after_each_slow_down(other_site)[0] >= 12


@pytest_twisted.ensureDeferred
async def test_pages_of_a_site_whose_robots_txt_is_unreachable_do_not_wait_for_its_hold(site):
    """robots.txt answers 503 with Retry-After: 30: the host is held, and its pages
    are disallowed (RFC 9309 §2.3.1.3).  They are decided, and dropped, at once: they
    would never reach the site, whatever the hold (a generous guard: the hold is 30 s)."""
    site.route("/robots.txt", status=503, headers={"Retry-After": "30"})
    started = time.monotonic()
    crawler = await crawl(pages(site, 6), **BACKOFF)
    assert time.monotonic() - started < 20
    assert site.paths() == ["/robots.txt"]
    assert crawler.stats.get_value("backoff/holds") == 1
    assert crawler.stats.get_value("rfc9309/forbidden") == 6


@pytest_twisted.ensureDeferred
async def test_backing_off_can_be_turned_off(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/", slow_down(retry_after="3"))
    crawler = await crawl(pages(site, 1), BACKOFF_ENABLED=False, **BACKOFF)
    assert crawler.spider.seen == pages(site, 1)
    assert site.paths() == ["/robots.txt", "/p/0", "/p/0"]  # retried, the site not held
    assert crawler.stats.get_value("backoff/holds") is None


@pytest.mark.parametrize(
    ("name", "value"), [("BACKOFF_HTTP_CODES", ["slow"]), ("BACKOFF_DELAY", 0)]
)
@pytest_twisted.ensureDeferred
async def test_a_bad_backoff_setting_stops_the_crawl_at_start_up(site, name, value):
    with pytest.raises(SettingError, match=name):
        await crawl([site.url + "/a"], **{name: value}, **BACKOFF)
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_with_the_fleet_redis_down_each_process_keeps_its_own_holds(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/", slow_down(retry_after="2"))
    crawler = await crawl(
        pages(site, 2), FLEET_REDIS_URL=f"redis://127.0.0.1:{refused_port()}/0", **BACKOFF
    )
    stats = crawler.stats.get_stats()
    assert stats.get("fleet/robots_error", 0) + stats.get("fleet/spacing_error", 0) >= 1
    assert len(crawler.spider.seen) == 2
    assert min(quiet_after_each_slow_down(site)) >= 2.0


@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")  # scrapy-redis's
@pytest_twisted.ensureDeferred
async def test_with_scrapy_redis_stats_collector_every_retry_after_holds_its_host(
    site, fleet_redis
):
    """scrapy-redis's ``RedisStatsCollector`` keeps the stats in a Redis hash and reads
    them back as integers: the largest Retry-After is kept in whole seconds (rounded
    up), so that every 429 holds its host (kept as ``2.0``, reading it back at the
    second 429 raised, and that hold was lost)."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/", slow_down(retry_after="2"), slow_down(retry_after="2"))
    crawler = await crawl(
        pages(site),
        BACKOFF_DELAY=0.2,
        STATS_CLASS="scrapy_redis.stats.RedisStatsCollector",
        REDIS_URL=fleet_redis,
        SCHEDULER_PERSIST=True,  # the collector keeps the stats after the close
        **BACKOFF,
    )
    quiet = quiet_after_each_slow_down(site)
    assert len(quiet) == 2
    assert min(quiet) >= 2.0
    assert crawler.stats.get_value("backoff/holds") == 2
    assert crawler.stats.get_value("backoff/retry_after_max") == 2
