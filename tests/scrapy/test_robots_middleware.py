"""The robots middleware in real crawls against a local server (RFC 9309 §2.3, §2.4).

Assertions are on what the *server* received."""

import json
import logging

import pytest
import pytest_twisted

from tests.crawl import BASE_SETTINGS, crawl
from tests.server import refused_port

ROBOTS = (
    b"User-agent: *\nDisallow: /private\n\n"
    b"User-agent: TestBot\nDisallow: /secret\nAllow: /secret/ok\n"
)


def pages(site, *paths):
    return [site.url + path for path in paths]


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_2xx_is_obeyed_for_the_crawlers_group(site, caplog):
    site.route("/robots.txt", body=ROBOTS)
    caplog.set_level(logging.DEBUG, logger="scrapy_rfc9309")
    crawler = await crawl(pages(site, "/a", "/secret/x", "/secret/ok", "/private"))
    assert (
        "Forbidden by robots.txt: Disallow: /secret (line 5; robots.txt fetched (HTTP 200)): "
        f"<GET {site.url}/secret/x>"
    ) in caplog.messages
    assert sorted(site.paths()) == ["/a", "/private", "/robots.txt", "/secret/ok"]
    assert crawler.stats.get_value("rfc9309/forbidden") == 1
    assert crawler.stats.get_value("rfc9309/request_count") == 1
    assert crawler.stats.get_value("rfc9309/response_status_count/200") == 1


def redirect(to):
    return {"status": 301, "headers": {"Location": to}}


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_five_redirects_are_followed_and_apply_to_the_original_authority(site):
    for hop in range(5):
        site.route(f"/r{hop}" if hop else "/robots.txt", **redirect(f"/r{hop + 1}"))
    site.route("/r5", body=b"User-agent: *\nDisallow: /private\n")
    crawler = await crawl(pages(site, "/a", "/private"))
    assert "/private" not in site.paths() and "/a" in site.paths()
    assert crawler.stats.get_value("rfc9309/request_count") == 6


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_six_redirects_are_unavailable_and_allow_everything(site):
    for hop in range(6):
        site.route(f"/r{hop}" if hop else "/robots.txt", **redirect(f"/r{hop + 1}"))
    site.route("/r6", body=b"User-agent: *\nDisallow: /\n")
    crawler = await crawl(pages(site, "/a", "/private"))
    assert "/r6" not in site.paths()
    assert {"/a", "/private"} <= set(site.paths())
    assert crawler.stats.get_value("rfc9309/unavailable") == 1


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_a_redirect_loop_is_unavailable_and_reported_as_one(site, caplog):
    caplog.set_level("INFO", logger="scrapy_rfc9309")
    site.route("/robots.txt", **redirect("/loop"))
    site.route("/loop", **redirect("/robots.txt"))
    crawler = await crawl(pages(site, "/a"))
    assert site.count("/robots.txt") == 1 and site.count("/loop") == 1
    assert "/a" in site.paths()
    assert crawler.stats.get_value("rfc9309/redirect_loop") == 1
    [report] = [r.getMessage() for r in caplog.records if "robots.txt report" in r.getMessage()]
    assert f"{site.url}: robots.txt unavailable (redirect loop): everything allowed" in report


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_cross_host_redirect_is_followed_despite_allowed_domains(site, other_site):
    # 127.0.0.1 and localhost are different hosts; allowed_domains names only one.
    other_site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n")
    site.route("/robots.txt", **redirect(f"http://localhost:{other_site.port}/robots.txt"))
    await crawl(pages(site, "/a", "/private"), spider_kwargs={"allowed_domains": ["127.0.0.1"]})
    assert other_site.paths() == ["/robots.txt"]
    assert "/private" not in site.paths() and "/a" in site.paths()


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_404_allows_everything(site):
    site.route("/robots.txt", status=404, body=b"not found")
    crawler = await crawl(pages(site, "/a", "/private"))
    assert {"/a", "/private"} <= set(site.paths())
    assert crawler.stats.get_value("rfc9309/unavailable") == 1


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_403_is_unavailable_even_if_its_body_disallows(site):
    site.route("/robots.txt", status=403, body=b"User-agent: *\nDisallow: /\n")
    await crawl(pages(site, "/a"))
    assert "/a" in site.paths()


@pytest.mark.parametrize("status", [429, 500, 503])
@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_429_and_5xx_are_unreachable_and_disallow_everything(site, status):
    site.route("/robots.txt", status=status, body=b"User-agent: *\nAllow: /\n")
    crawler = await crawl(pages(site, "/a", "/b", "/c"))
    assert site.paths() == ["/robots.txt"]
    assert crawler.stats.get_value("rfc9309/unreachable") == 1
    assert crawler.stats.get_value("rfc9309/forbidden") == 3
    assert crawler.stats.get_value(f"rfc9309/response_status_count/{status}") == 1


@pytest_twisted.ensureDeferred
async def test_unreachable_allow_setting_fails_open(site):
    site.route("/robots.txt", status=503)
    await crawl(pages(site, "/a"), RFC9309_UNREACHABLE="allow")
    assert "/a" in site.paths()


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_a_hang_past_the_timeout_is_unreachable(site):
    site.route("/robots.txt", delay=3, body=b"User-agent: *\nAllow: /\n")
    crawler = await crawl(pages(site, "/a"), RFC9309_TIMEOUT=0.5)
    assert site.paths() == ["/robots.txt"]
    assert crawler.stats.get_value("rfc9309/exception_count/DownloadTimeoutError") == 1
    assert crawler.stats.get_value("rfc9309/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_connection_refused_is_unreachable(caplog):
    url = f"http://127.0.0.1:{refused_port()}/a"
    caplog.set_level(logging.DEBUG, logger="scrapy_rfc9309")
    crawler = await crawl([url])
    forbidden = [m for m in caplog.messages if m.startswith("Forbidden by robots.txt")]
    assert forbidden == [
        "Forbidden by robots.txt: robots.txt unreachable (network error): everything "
        f"disallowed: <GET {url}>"
    ]
    assert crawler.stats.get_value("rfc9309/unreachable") == 1
    assert crawler.stats.get_value("rfc9309/forbidden") == 1
    assert crawler.stats.get_value("rfc9309/exception_count/DownloadConnectionRefusedError") == 1
    assert crawler.stats.get_value("downloader/request_count") == 1  # robots.txt only


@pytest_twisted.ensureDeferred
async def test_one_fetch_for_16_concurrent_requests_and_every_waiter_is_checked(site):
    site.route("/robots.txt", delay=1.0, body=b"User-agent: *\nDisallow: /private\n")
    urls = pages(site, *[f"/private/{i}" for i in range(8)], *[f"/public/{i}" for i in range(8)])
    crawler = await crawl(urls)
    assert site.count("/robots.txt") == 1
    assert not [p for p in site.paths() if p.startswith("/private")]
    assert len([p for p in site.paths() if p.startswith("/public")]) == 8
    assert crawler.stats.get_value("rfc9309/forbidden") == 8


@pytest_twisted.ensureDeferred
async def test_two_ports_of_one_host_are_two_authorities(site, other_site):
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /x\n")
    other_site.route("/robots.txt", body=b"User-agent: *\nDisallow: /y\n")
    await crawl(pages(site, "/x", "/y") + pages(other_site, "/x", "/y"))
    assert sorted(site.paths()) == ["/robots.txt", "/y"]
    assert sorted(other_site.paths()) == ["/robots.txt", "/x"]


@pytest.mark.parametrize(
    ("url", "authority"),
    [
        ("http://Example.COM/a", "http://example.com"),
        ("http://example.com:80/a", "http://example.com"),
        ("https://example.com:443/a", "https://example.com"),
        ("https://example.com:80/a", "https://example.com:80"),
        ("http://user:secret@example.com:8080/a", "http://example.com:8080"),
        ("http://[::1]:8080/a", "http://[::1]:8080"),
        ("http://[::1]/a", "http://[::1]"),
    ],
)
def test_rfc_2_3_the_cache_key_is_scheme_host_and_port_but_the_default(url, authority):
    from scrapy import Request

    from scrapy_rfc9309._shared import authority_of

    assert authority_of(Request(url)) == authority
    assert authority_of(Request(url)) == authority  # asked again: the same


@pytest_twisted.ensureDeferred
async def test_dont_obey_robotstxt_passes_untouched(site):
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /\n")
    await crawl(pages(site, "/a"), meta={"dont_obey_robotstxt": True})
    assert site.paths() == ["/a"]


@pytest_twisted.ensureDeferred
async def test_exclude_paths_win_even_with_dont_obey_robotstxt(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    crawler = await crawl(
        pages(site, "/admin/x", "/a?token=1", "/logout-now", "/ok"),
        meta={"dont_obey_robotstxt": True},
        RFC9309_EXCLUDE_PATHS=["/admin", r"re:\?.*token=", "*/*logout*"],
    )
    assert site.paths() == ["/ok"]
    assert crawler.stats.get_value("rfc9309/excluded") == 3


@pytest_twisted.ensureDeferred
async def test_rfc_2_5_a_50_mib_robots_txt_is_cut_and_its_head_obeyed(site):
    head = b"User-agent: *\nDisallow: /private\n"

    def body():
        yield head
        filler = b"# " + b"x" * 1021 + b"\n"
        for _ in range(50 * 1024):  # 50 MiB of comment lines
            yield filler

    site.route("/robots.txt", body=body)
    crawler = await crawl(pages(site, "/a", "/private"))
    assert "/private" not in site.paths() and "/a" in site.paths()
    assert crawler.stats.get_value("rfc9309/truncated") == 1
    assert crawler.stats.get_value("rfc9309/success") == 1


class FakeClock:
    """Stands in for time.monotonic in the middleware (the clock is the one thing mocked)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr("scrapy_rfc9309.downloadermiddlewares.robotstxt.monotonic", fake)
    monkeypatch.setattr("scrapy_rfc9309.downloadermiddlewares.robotstxt._fetch.monotonic", fake)
    monkeypatch.setattr(
        "scrapy_rfc9309.downloadermiddlewares.robotstxt._persistent.monotonic", fake
    )
    monkeypatch.setattr(
        "scrapy_rfc9309.downloadermiddlewares.robotstxt._persistent.wall_clock", fake
    )
    return fake


@pytest_twisted.ensureDeferred
async def test_rfc_2_4_cache_expires_after_the_ttl(site, clock):
    from tests.crawl import ChainSpider

    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n")
    steps = iter([10, 100])  # +10 s: still cached; +100 s: past the 60 s TTL

    def between(response):
        clock.now += next(steps)

    await crawl(
        pages(site, "/a", "/b", "/c"),
        spider=ChainSpider,
        RFC9309_CACHE_TTL=60,
        spider_kwargs={"between": between},
    )
    assert site.paths() == ["/robots.txt", "/a", "/b", "/robots.txt", "/c"]


@pytest_twisted.ensureDeferred
async def test_rfc_2_4_failure_is_retried_after_the_failure_ttl_and_the_good_copy_reused(
    site, clock
):
    from tests.crawl import ChainSpider

    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n")
    actions = iter(
        [
            lambda: site.route("/robots.txt", status=503),  # +100 s: expired, now failing
            None,  # +5 s: the failure is cached (failure TTL 30 s)
            lambda: site.route("/robots.txt", body=b"User-agent: *\nDisallow: /\n"),  # +100 s
        ]
    )
    advance = iter([100, 5, 100])

    def between(response):
        action = next(actions)
        if action:
            action()
        clock.now += next(advance)

    crawler = await crawl(
        pages(site, "/a", "/b", "/private/c", "/d"),
        spider=ChainSpider,
        RFC9309_CACHE_TTL=60,
        RFC9309_FAILURE_TTL=30,
        spider_kwargs={"between": between},
    )
    # /b: robots.txt fails (503) but the last good copy still allows /b;
    # /private/c: that copy still disallows it, and the failure is not refetched yet;
    # /d: after the failure TTL robots.txt is fetched again and now disallows all.
    assert site.paths() == ["/robots.txt", "/a", "/robots.txt", "/b", "/robots.txt"]
    assert crawler.stats.get_value("rfc9309/stale") == 1
    assert crawler.stats.get_value("rfc9309/forbidden") == 2


@pytest_twisted.ensureDeferred
async def test_a_site_that_stays_unreachable_is_warned_about_once_and_again_after_it_answered(
    site, clock, caplog
):
    """Each robots.txt fetch after the failure TTL fails again (503) until one
    answers, then the next fails: a WARNING at the first failure and at the first
    after the answer, none for the refetches between (nothing is kept for a site
    that failed but its cache entry)."""
    from tests.crawl import ChainSpider

    site.route("/robots.txt", status=503)
    actions = iter(
        [
            None,  # +100 s: expired, fails again
            lambda: site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n"),
            lambda: site.route("/robots.txt", status=503),
        ]
    )

    def between(response):
        action = next(actions)
        if action:
            action()
        clock.now += 100

    caplog.set_level("WARNING", logger="scrapy_rfc9309")
    await crawl(
        pages(site, "/a", "/b", "/c", "/d"),
        spider=ChainSpider,
        RFC9309_CACHE_TTL=60,
        RFC9309_FAILURE_TTL=30,
        spider_kwargs={"between": between},
    )
    # /d: the last good copy is obeyed while the file is unreachable (RFC 9309 §2.4).
    assert site.paths() == ["/robots.txt", "/robots.txt", "/robots.txt", "/c", "/robots.txt", "/d"]
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith(site.url)]
    assert len(warned) == 2, warned
    assert all("503" in message for message in warned), warned


received_signals = []


class SignalRecorder:
    """An extension recording the robots_parsed signal."""

    @classmethod
    def from_crawler(cls, crawler):
        from scrapy_rfc9309._shared import ROBOTS_PARSED

        crawler.signals.connect(cls.record, signal=ROBOTS_PARSED)
        return cls()

    @staticmethod
    def record(robotparser, request):
        received_signals.append((robotparser, request.url))


@pytest_twisted.ensureDeferred
async def test_robots_parsed_signal_carries_the_parsed_file_and_its_delay(site):
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 2\nDisallow: /x\n")
    received_signals.clear()
    await crawl(
        pages(site, "/a"), EXTENSIONS={"tests.scrapy.test_robots_middleware.SignalRecorder": 0}
    )
    [(parser, url)] = received_signals
    assert url == site.url + "/robots.txt"
    assert parser.crawl_delay("TestBot") == 2
    assert not parser.allowed(site.url + "/x", "TestBot")


@pytest_twisted.ensureDeferred
async def test_our_parser_on_scrapys_own_middleware_matches_like_ours(site):
    """One request at a time: Scrapy's own middleware hands the parser only to the
    first request that waits for robots.txt and lets the others through unchecked
    (a middleware decision the adapter cannot change; see the README)."""
    site.route(
        "/robots.txt",
        body=b"User-agent: Test\nDisallow: /\n\n"
        b"User-agent: TestBot\nDisallow: /secret\nAllow: /secret/ok\nDisallow: /*.pdf$\n",
    )
    crawler = await crawl(
        pages(site, "/a", "/secret/x", "/secret/ok", "/doc.pdf", "/doc.pdf?x"),
        DOWNLOADER_MIDDLEWARES={},  # Scrapy's own RobotsTxtMiddleware
        ROBOTSTXT_PARSER="scrapy_rfc9309.RobotParser",
        CONCURRENT_REQUESTS=1,
    )
    assert sorted(site.paths()) == ["/a", "/doc.pdf?x", "/robots.txt", "/secret/ok"]
    assert crawler.stats.get_value("robotstxt/forbidden") == 2


@pytest_twisted.ensureDeferred
async def test_a_cancelled_fetch_fails_its_waiters_and_the_next_request_fetches_again():
    import asyncio

    from scrapy import Request
    from scrapy.utils.test import get_crawler

    from scrapy_rfc9309 import RobotsTxtMiddleware
    from scrapy_rfc9309.robots import AccessPolicy
    from tests.crawl import BASE_SETTINGS
    from tests.helpers import on_loop

    middleware = RobotsTxtMiddleware.from_crawler(get_crawler(settings_dict=BASE_SETTINGS))
    request = Request("http://a.example/x")
    entry = AccessPolicy().unavailable(0.0)

    async def never_ending_fetch(authority, previous, route):
        await asyncio.sleep(3600)

    async def answering_fetch(authority, previous, route):
        return entry

    async def scenario():
        middleware._fetch = never_ending_fetch
        first = asyncio.ensure_future(middleware.entry("http://a.example", request))
        await asyncio.sleep(0.01)
        waiting = asyncio.ensure_future(middleware.entry("http://a.example", request))
        await asyncio.sleep(0.01)
        first.cancel()
        for task in (first, waiting):
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 5)  # a hang here is the bug
        middleware._fetch = answering_fetch
        return await asyncio.wait_for(middleware.entry("http://a.example", request), 5)

    assert await on_loop(scenario()) is entry


@pytest_twisted.ensureDeferred
async def test_the_close_report_names_each_site_its_drops_rules_and_delay(site, caplog):
    caplog.set_level("INFO", logger="scrapy_rfc9309")
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.1\nDisallow: /private\n")
    crawler = await crawl(pages(site, "/a", "/private/1", "/private/2"))
    [report] = [r.getMessage() for r in caplog.records if "robots.txt report" in r.getMessage()]
    assert (
        f"{site.url}: robots.txt fetched (HTTP 200); 2 requests dropped: "
        "'Disallow: /private' (line 3) x2; Crawl-delay 0.1 s"
    ) in report
    [entry] = crawler.stats.get_value("rfc9309/report")
    assert entry["dropped"] == 2 and entry["rules"][0]["line"] == 3


@pytest.mark.redis
@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")  # scrapy-redis's
@pytest_twisted.ensureDeferred
async def test_a_stats_collector_that_keeps_only_scalars_gets_the_report_as_json(
    site, fleet_redis, caplog
):
    """scrapy-redis's ``RedisStatsCollector`` keeps each stat in a Redis hash field,
    which takes no list: the report goes there as JSON text, and the close logs no
    error (it raised in the ``spider_closed`` handler)."""
    import redis

    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n")
    await crawl(
        pages(site, "/a", "/private/1"),
        STATS_CLASS="scrapy_redis.stats.RedisStatsCollector",
        REDIS_URL=fleet_redis,
        SCHEDULER_PERSIST=True,  # the collector keeps the stats after the close
    )
    # (Scrapy's own LogStats fails at the close with this collector: not counted.)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [message for message in errors if "scrapy_rfc9309" in message]
    [hash_key] = redis.Redis.from_url(fleet_redis).keys("*:stats")
    stored = redis.Redis.from_url(fleet_redis).hget(hash_key, "rfc9309/report")
    [entry] = json.loads(stored)
    assert entry["site"] == site.url and entry["dropped"] == 1


def test_the_close_report_says_how_many_more_rules_dropped_requests():
    from scrapy_rfc9309.downloadermiddlewares.robotstxt._report import TOP_RULES, RobotsReport

    report = RobotsReport()
    for line in range(2, 8):  # 6 rules, rule on line n dropping n requests: 27 in all
        for _ in range(line):
            report.dropped(
                "http://s", "robots.txt fetched (HTTP 200)", f"Disallow: /{line}", line, None
            )
    [text] = report.lines()
    assert text.startswith("http://s: robots.txt fetched (HTTP 200); 27 requests dropped: ")
    assert "'Disallow: /7' (line 7) x7, 'Disallow: /6' (line 6) x6, 'Disallow: /5'" in text
    assert text.endswith(f" and {6 - TOP_RULES} more rules x9")  # 2 + 3 + 4
    [entry] = report.summary()
    assert [rule["dropped"] for rule in entry["rules"]] == [7, 6, 5, 4, 3, 2]  # all kept


def test_the_close_report_names_the_top_sites_and_sums_the_rest():
    from scrapy_rfc9309.downloadermiddlewares.robotstxt._report import TOP_SITES, RobotsReport

    report = RobotsReport()
    for number in range(TOP_SITES + 5):
        for _ in range(number + 1):
            report.dropped(
                f"http://s{number}", "robots.txt fetched (HTTP 200)", "Disallow: /", 2, None
            )
    lines = report.lines()
    assert len(lines) == TOP_SITES + 1
    assert lines[0].startswith(f"http://s{TOP_SITES + 4}: ")  # most dropped first
    assert lines[-1] == "... and 5 more sites: 15 requests dropped"  # 1+2+3+4+5


def test_the_close_report_keeps_a_bounded_count_of_sites_and_sums_later_ones():
    """A broad crawl's report costs no memory for each of its sites: past
    MAX_SITES, a new site's drops are only summed (and its preferences and failed
    fetch not kept); the sites kept go on counting."""
    from scrapy_rfc9309.downloadermiddlewares.robotstxt import _report

    report = _report.RobotsReport()
    fetched = "robots.txt fetched (HTTP 200)"
    for number in range(_report.MAX_SITES + 100):
        report.dropped(f"http://s{number}", fetched, "Disallow: /", 2, None)
    report.preferences("http://late", fetched, ["Content-Usage: train-ai=n"])
    report.failed("http://late", "unreachable")
    report.dropped("http://s0", fetched, "Disallow: /", 2, None)
    assert "http://late" not in report._sites and len(report._sites) == _report.MAX_SITES
    lines = report.lines()
    assert lines[0].startswith("http://s0: robots.txt fetched (HTTP 200); 2 requests dropped")
    more, summed = (
        _report.MAX_SITES - _report.TOP_SITES,
        _report.MAX_SITES + 100 - _report.TOP_SITES,
    )
    assert lines[-1] == f"... and {more}+ more sites: {summed} requests dropped"
    one = _report.RobotsReport()
    one.dropped("http://one", fetched, "Disallow: /", 2, None)
    assert "; 1 request dropped: " in one.lines()[0]


class BrokenForRobotsTxt:
    """A downloader middleware with a bug that shows only on robots.txt requests."""

    def process_request(self, request, spider=None):
        if request.url.endswith("/robots.txt"):
            raise ValueError("a bug in some middleware")


@pytest_twisted.ensureDeferred
async def test_an_unexpected_error_fetching_robots_txt_is_logged_as_a_bug_then_unreachable(
    site, caplog
):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    crawler = await crawl(
        [f"{site.url}/a"],
        DOWNLOADER_MIDDLEWARES={
            **BASE_SETTINGS["DOWNLOADER_MIDDLEWARES"],
            f"{__name__}.BrokenForRobotsTxt": 50,
        },
    )
    [error] = [
        r for r in caplog.records if r.levelname == "ERROR" and "robots.txt" in r.getMessage()
    ]
    assert "treating it as unreachable" in error.getMessage()
    assert error.exc_info is not None and error.exc_info[0] is ValueError  # the traceback
    assert site.paths() == []  # unreachable: everything disallowed
    assert crawler.stats.get_value("rfc9309/exception_count/ValueError") == 1


@pytest_twisted.ensureDeferred
async def test_the_cache_is_bounded_by_the_memory_its_entries_hold():
    """Twelve authorities (ports of 127.0.0.1) crawled one after another, then the
    first again, with room for about three entries: the cache never holds more
    than its bound, and the first authority's robots.txt, dropped meanwhile, is
    fetched again."""
    from scrapy_rfc9309.robots import FetchOutcome, RobotsEntry, RobotsTxt
    from tests.crawl import ChainSpider
    from tests.server import Site

    body = b"User-agent: *\nDisallow: /private/\nAllow: /\n"
    entry = RobotsEntry(FetchOutcome.SUCCESS, RobotsTxt.parse(body), 0.0, 60.0)
    room = int(entry.memory_estimate("AnyCrawler") * 3.5)  # about three entries
    sites = [Site() for _ in range(12)]
    try:
        for each in sites:
            each.route("/robots.txt", body=body)
        urls = [f"{each.url}/page" for each in sites] + [f"{sites[0].url}/again"]
        crawler = await crawl(
            urls,
            spider=ChainSpider,
            RFC9309_CACHE_MAX_BYTES=room,
            RFC9309_PERSISTENT_CACHE=False,  # else the dropped entry is read back from it
        )
    finally:
        for each in sites:
            each.close()
    stats = crawler.stats
    assert 1 <= stats.get_value("rfc9309/cache_entries") <= 3
    assert stats.get_value("rfc9309/cache_bytes") <= room
    assert stats.get_value("rfc9309/cache_evicted") >= 10
    assert sites[0].paths() == ["/robots.txt", "/page", "/robots.txt", "/again"]
    assert all(each.paths() == ["/robots.txt", "/page"] for each in sites[1:])


@pytest_twisted.ensureDeferred
async def test_robots_txt_goes_through_the_proxy_the_spiders_request_names(site, other_site):
    """A request whose meta names a proxy (set by the spider, which the middlewares'
    own proxies do not see) has its site's robots.txt fetched through that proxy
    too: the site sees the file and the pages asked for from one place.  The other
    site plays the proxy: a request through it names the whole URL."""
    proxy = other_site
    proxy.route(f"{site.url}/robots.txt", body=b"User-agent: *\nDisallow: /private\n")
    crawler = await crawl(
        pages(site, "/p", "/private/x"), meta={"proxy": proxy.url}, RETRY_ENABLED=False
    )
    assert site.paths() == []  # nothing went to the site directly
    assert sorted(proxy.paths()) == [f"{site.url}/p", f"{site.url}/robots.txt"]
    assert crawler.stats.get_value("rfc9309/forbidden") == 1


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://a.com/robots.txt", "https://a.com"),  # http:// -> https://
        ("http://a.com/robots.txt", None),  # the authority's own: no other
        ("http://www.a.com:8080/robots.txt", "http://www.a.com:8080"),
        ("http://b.com/robots.txt?lang=en", None),  # another resource
        ("http://b.com/robots-real.txt", None),
        ("http://b.com/x/robots.txt", None),
    ],
)
def test_rfc_2_3_1_2_a_redirect_ending_at_another_authoritys_own_robots_txt(url, expected):
    """The file a redirect found is that other authority's too only when the final
    URL is its own ``/robots.txt``."""
    from scrapy_rfc9309.downloadermiddlewares.robotstxt._fetch import own_robots_of

    assert own_robots_of(url, "http://a.com") == expected
