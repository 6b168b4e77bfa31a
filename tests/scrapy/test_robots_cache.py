"""robots.txt kept across restarts: real crawls against many sites, stopped and
started again, and what the sites' servers saw each time."""

from __future__ import annotations

import contextlib
import logging
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest
import pytest_twisted
from scrapy.spiders import SitemapSpider

from scrapy_rfc9309 import SitemapsFromRobotsMixin
from tests.broad_site import BroadSite, addresses
from tests.crawl import crawl
from tests.helpers import REFUSE_ROBOTS_WRITES, on_loop
from tests.processes import crawl_process, run_crawl

ETAG = '"v1"'
PERSISTENT = "scrapy_rfc9309.downloadermiddlewares.robotstxt._persistent"
ROBOTS = b"User-agent: *\nDisallow: /private\n"


class Sites:
    """50 sites (one loopback address each) whose robots.txt carries an ETag and
    answers a matching ``If-None-Match`` with 304; counts what each answer was."""

    def __init__(self, count: int = 50) -> None:
        self.answers: Counter[str] = Counter()
        self.site = BroadSite(addresses(count, first=200), self.respond)

    def respond(self, host, path, headers):
        if path == "/robots.txt":
            if headers.get("if-none-match") == ETAG:
                self.answers["304"] += 1
                return 304, {"ETag": ETAG}, b""
            self.answers["robots"] += 1
            return 200, {"ETag": ETAG}, ROBOTS
        self.answers[path.split("/")[1]] += 1
        return 200, {"Content-Type": "text/html"}, b"<html><body>page</body></html>"

    def urls(self) -> list[str]:
        site = self.site
        return [site.url(host, path) for host in site.hosts for path in ("/page", "/private/x")]

    def take(self) -> Counter[str]:
        answers, self.answers = self.answers, Counter()
        return answers


@pytest_twisted.ensureDeferred
async def test_a_restarted_crawl_fetches_no_robots_txt_then_refreshes_with_conditional_requests(
    tmp_path, monkeypatch, caplog
):
    """Each crawl's closing INFO line says what the kept copies saved."""
    cache = str(tmp_path / "robots.sqlite")
    sites = Sites()
    said = "scrapy_rfc9309.downloadermiddlewares.robotstxt", logging.INFO
    caplog.set_level(logging.INFO, logger=said[0])
    try:
        first = await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache)
        assert sites.take() == {"robots": 50, "page": 50}
        assert (*said, "robots.txt: 50 requests sent") in caplog.record_tuples
        second = await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache)
        assert sites.take() == {"page": 50}  # no robots.txt request, still obeyed
        assert (*said, "robots.txt: 50 kept from an earlier crawl, 0 requests sent") in (
            caplog.record_tuples
        )
        # An hour later, past the cache's TTL (RFC9309_CACHE_TTL, 3600 s).
        later = time.time() + 3700
        monkeypatch.setattr(
            "scrapy_rfc9309.downloadermiddlewares.robotstxt._persistent.wall_clock", lambda: later
        )
        third = await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache)
        assert sites.take() == {"304": 50, "page": 50}
        assert (*said, "robots.txt: 50 refreshed unchanged (304), 50 requests sent") in (
            caplog.record_tuples
        )
        fourth = await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache)
        assert sites.take() == {"page": 50}  # the 304 renewed the copies
    finally:
        sites.site.close()
    assert first.stats.get_value("rfc9309/persistent_hit") is None
    assert second.stats.get_value("rfc9309/persistent_hit") == 50
    assert third.stats.get_value("rfc9309/not_modified") == 50
    for crawler in (first, second, third, fourth):
        assert crawler.stats.get_value("rfc9309/forbidden") == 50


@pytest_twisted.ensureDeferred
async def test_the_running_crawls_ttl_decides_whether_a_kept_copy_is_fresh(tmp_path, monkeypatch):
    cache = str(tmp_path / "robots.sqlite")
    sites = Sites(3)
    now = [time.time()]
    monkeypatch.setattr(f"{PERSISTENT}.wall_clock", lambda: now[0])
    try:
        await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache)  # kept with 3600 s
        assert sites.take() == {"robots": 3, "page": 3}
        now[0] += 4
        await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache, RFC9309_CACHE_TTL=2)
        assert sites.take() == {"304": 3, "page": 3}  # older than this crawl's 2 s
        await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache, RFC9309_CACHE_TTL=2)
        assert sites.take() == {"page": 3}  # renewed, by a crawl with 2 s
        now[0] += 4
        await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=cache)
        assert sites.take() == {"page": 3}  # younger than this crawl's 3600 s
    finally:
        sites.site.close()


@pytest_twisted.ensureDeferred
async def test_the_report_says_a_copy_was_kept_from_when_with_its_crawl_delay(site, tmp_path):
    cache = str(tmp_path / "robots.sqlite")
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\nCrawl-delay: 0.2\n")
    urls = [f"{site.url}/page", f"{site.url}/private/x"]
    first = await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=cache)
    [fetched] = first.stats.get_value("rfc9309/report")
    assert fetched["robots_txt"] == "robots.txt fetched (HTTP 200)"
    second = await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=cache)
    assert site.count("/robots.txt") == 1
    [kept] = second.stats.get_value("rfc9309/report")
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert kept["robots_txt"].startswith(
        f"robots.txt kept (HTTP 200, kept from the fetch at {day} "
    )
    assert kept["crawl_delay"] == 0.2 == fetched["crawl_delay"]


@pytest_twisted.ensureDeferred
async def test_a_site_unreachable_at_restart_gets_its_last_good_copy(site, tmp_path, monkeypatch):
    cache = str(tmp_path / "robots.sqlite")
    site.route("/robots.txt", body=ROBOTS)
    await crawl([f"{site.url}/page"], RFC9309_PERSISTENT_CACHE_PATH=cache)
    site.route("/robots.txt", status=503)
    later = time.time() + 3700  # past the TTL: fetched again, and it fails
    monkeypatch.setattr(
        "scrapy_rfc9309.downloadermiddlewares.robotstxt._persistent.wall_clock", lambda: later
    )
    crawler = await crawl(
        [f"{site.url}/page", f"{site.url}/private/x"], RFC9309_PERSISTENT_CACHE_PATH=cache
    )
    assert site.paths() == ["/robots.txt", "/page", "/robots.txt", "/page"]
    assert crawler.stats.get_value("rfc9309/stale") == 1  # not "everything disallowed"


@pytest_twisted.ensureDeferred
async def test_scrapys_http_cache_never_answers_for_robots_txt(site, tmp_path):
    """With Scrapy's HTTP cache on (``HTTPCACHE_ENABLED``, its default policy keeping
    every answer forever), robots.txt is still the site's: kept by this package's
    TTL (RFC 9309 §2.4), never by the HTTP cache.  A 503 the cache kept made every
    later crawl see the site unreachable, so nothing allowed; a changed file was
    never seen again."""
    http_cache = {
        "HTTPCACHE_ENABLED": True,
        "HTTPCACHE_DIR": str(tmp_path / "httpcache"),
        "RFC9309_PERSISTENT_CACHE_PATH": str(tmp_path / "robots.sqlite"),
    }
    urls = [f"{site.url}/page", f"{site.url}/private/x"]
    site.route("/robots.txt", status=503)
    first = await crawl(urls, **http_cache)
    assert first.spider.seen == []  # unreachable: nothing allowed (RFC 9309 §2.3.1.4)
    site.route("/robots.txt", body=ROBOTS)  # the site is back
    second = await crawl(urls, **http_cache)
    assert site.count("/robots.txt") == 2
    assert [url.rsplit("/", 1)[1] for url in second.spider.seen] == ["page"]
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /page\n")  # changed
    third = await crawl(urls, **http_cache, RFC9309_CACHE_TTL=0.001)  # kept copy expired
    assert site.count("/robots.txt") == 3
    assert [url.rsplit("/", 1)[1] for url in third.spider.seen] == ["x"]


@pytest_twisted.ensureDeferred
async def test_a_damaged_cache_file_is_said_once_moved_aside_and_robots_txt_fetched(
    site, tmp_path, caplog
):
    cache = tmp_path / "robots.sqlite"
    cache.write_bytes(b"this is not an SQLite database, " * 100)
    site.route("/robots.txt", body=ROBOTS)
    with caplog.at_level(logging.WARNING):
        crawler = await crawl(
            [f"{site.url}/page", f"{site.url}/private/x"], RFC9309_PERSISTENT_CACHE_PATH=str(cache)
        )
    assert site.paths() == ["/robots.txt", "/page"]
    damaged = [r for r in caplog.records if "robots.txt cache was damaged" in r.getMessage()]
    assert len(damaged) == 1
    assert Path(f"{cache}.corrupt").exists()
    assert crawler.stats.get_value("rfc9309/persistent_replaced") == 1
    await crawl([f"{site.url}/page"], RFC9309_PERSISTENT_CACHE_PATH=str(cache))
    assert site.count("/robots.txt") == 1  # the new file works


@pytest_twisted.ensureDeferred
async def test_damaged_or_foreign_rows_are_dropped_and_fetched_again(site, tmp_path):
    cache = tmp_path / "robots.sqlite"
    site.route("/robots.txt", body=ROBOTS)
    urls = [f"{site.url}/page"]
    await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=str(cache))
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE robots SET body = substr(body, 1, 10)")  # truncated
    await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=str(cache))
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE robots SET outcome = 'from the future'")
    await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=str(cache))
    with sqlite3.connect(cache) as db:
        db.execute("PRAGMA user_version = 99")  # another version's schema
    await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=str(cache))
    assert site.count("/robots.txt") == 4
    await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=str(cache))
    assert site.count("/robots.txt") == 4  # the last copy was sound


@pytest.mark.parametrize("count", [1, 20])
@pytest_twisted.ensureDeferred
async def test_a_cache_file_that_refuses_writes_is_said_once_and_the_crawl_obeys(
    tmp_path, caplog, count
):
    # With one site the failed write is said when the crawl closes the file.
    cache = tmp_path / "robots.sqlite"
    sites = Sites(count)
    try:
        await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=str(cache))
        with sqlite3.connect(cache) as db:
            db.execute("DELETE FROM robots")
            db.execute(REFUSE_ROBOTS_WRITES)
        sites.take()
        with caplog.at_level(logging.WARNING):
            crawler = await crawl(sites.urls(), RFC9309_PERSISTENT_CACHE_PATH=str(cache))
        assert sites.take() == {"robots": count, "page": count}
    finally:
        sites.site.close()
    said = [r.getMessage() for r in caplog.records if "the disk refuses" in r.getMessage()]
    assert len(said) == 1, said
    assert crawler.stats.get_value("rfc9309/persistent_error") == 1
    assert crawler.stats.get_value("rfc9309/forbidden") == count


@pytest.mark.subprocess
def test_a_crawl_killed_mid_crawl_leaves_a_cache_the_next_run_uses(site, tmp_path):
    import json

    cache = str(tmp_path / "robots.sqlite")
    site.route("/robots.txt", body=ROBOTS)
    site.route("/slow", body=b"<html></html>", delay=30)
    settings = {
        "ROBOTSTXT_OBEY": True,
        "RFC9309_PERSISTENT_CACHE_PATH": cache,
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
    }
    process = crawl_process(json.dumps(settings), f"{site.url}/slow")
    try:
        deadline = time.monotonic() + 60
        # robots.txt read, its copy written (without the crawl waiting), the page on the wire
        while "/slow" not in site.paths() or not rows(cache):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    site.route("/slow", body=b"<html></html>")
    result = run_crawl(json.dumps(settings), f"{site.url}/slow")
    stats = json.loads(result.stdout.strip().splitlines()[-1])
    assert stats["rfc9309/persistent_hit"] == 1
    assert site.paths() == ["/robots.txt", "/slow", "/slow"]


def rows(cache: str) -> int:
    """The records in the SQLite file *cache* (0 while it is not made yet)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as db:
            return db.execute("SELECT COUNT(*) FROM robots").fetchone()[0]
    except sqlite3.Error:
        return 0


class Sitemaps(SitemapsFromRobotsMixin, SitemapSpider):
    name = "sitemaps"
    seen: list[str]

    def parse(self, response):
        self.seen.append(response.url)


@pytest_twisted.ensureDeferred
async def test_a_sitemap_spider_reads_the_sitemaps_of_robots_txt_without_a_second_fetch(site):
    site.route(
        "/robots.txt",
        body=(
            f"User-agent: *\nDisallow: /private\nSitemap: {site.url}/a.xml\nSitemap: /b.xml\n"
        ).encode(),
    )
    for name, page in (("a", "/one"), ("b", "/private/two")):
        site.route(
            f"/{name}.xml",
            body=(
                '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{site.url}{page}</loc></url></urlset>"
            ).encode(),
            headers={"Content-Type": "application/xml"},
        )
    crawler = await crawl(
        [], spider=Sitemaps, spider_kwargs={"sitemap_urls": [f"{site.url}/robots.txt"]}
    )
    assert site.count("/robots.txt") == 1
    assert sorted(site.paths()) == ["/a.xml", "/b.xml", "/one", "/robots.txt"]
    assert crawler.spider.seen == [f"{site.url}/one"]


@pytest_twisted.ensureDeferred
async def test_a_fleet_keeps_robots_txt_in_its_redis_across_restarts(site, redis_server):
    import redis

    url = redis_server.url.rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(url).flushdb()
    site.route("/robots.txt", body=ROBOTS)
    urls = [f"{site.url}/page", f"{site.url}/private/x"]
    await crawl(urls, FLEET_REDIS_URL=url)
    # The fleet's live copy (its host the hash tag).
    redis.Redis.from_url(url).delete(f"rfc9309:robots:{{127.0.0.1}}:{site.url}")
    again = await crawl(urls, FLEET_REDIS_URL=url)
    assert site.paths() == ["/robots.txt", "/page", "/page"]
    assert again.stats.get_value("rfc9309/persistent_hit") == 1


@pytest_twisted.ensureDeferred
async def test_a_robots_txt_over_the_size_limit_is_kept_as_it_was_read(site, tmp_path):
    cache = str(tmp_path / "robots.sqlite")
    filler = b"".join(b"Disallow: /filler/%d\n" % n for n in range(40_000))  # ~840 KB
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n" + filler)
    urls = [f"{site.url}/page", f"{site.url}/private/x"]
    await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=cache)
    again = await crawl(urls, RFC9309_PERSISTENT_CACHE_PATH=cache)
    assert site.count("/robots.txt") == 1  # read back, not refused as too large
    assert again.stats.get_value("rfc9309/persistent_hit") == 1
    assert again.stats.get_value("rfc9309/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_a_kept_copy_fetched_during_this_crawl_is_not_called_an_earlier_crawls(tmp_path):
    """In a fleet, another process may have kept a copy seconds ago: the close report
    counts it apart from the copies of earlier crawls."""
    from scrapy.utils.test import get_crawler

    from scrapy_rfc9309._settings import ROBOTS_DEFAULTS, RobotsSettings, with_defaults
    from scrapy_rfc9309.downloadermiddlewares.robotstxt._persistent import (
        PersistentRobotsFetcher,
    )
    from scrapy_rfc9309.robots import SQLiteRobotsStore, StoredRobots

    crawler = get_crawler(settings_dict={"ROBOTSTXT_OBEY": True})
    crawler.stats.open_spider()

    class NoFetch:
        config = RobotsSettings.from_settings(with_defaults(crawler.settings, ROBOTS_DEFAULTS))

        async def fetch(self, *args):
            raise AssertionError("a fresh kept copy needs no request")

    store = SQLiteRobotsStore(tmp_path / "kept.sqlite", 512_000, time.time)
    fetcher = PersistentRobotsFetcher(crawler, NoFetch(), store, "kept.sqlite")
    body = b"User-agent: *\nDisallow: /x\n"

    async def kept_then_read() -> None:
        for authority, fetched_at in (("http://now.com", 0), ("http://old.com", -60)):
            record = StoredRobots("success", 200, body, fetcher.started + fetched_at, 3600)
            await store.put(authority, record)
            await fetcher.fetch(authority)
        await store.close()

    await on_loop(kept_then_read())
    assert crawler.stats.get_value("rfc9309/this_run_hit") == 1
    assert crawler.stats.get_value("rfc9309/persistent_hit") == 1
