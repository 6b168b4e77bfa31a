"""The crawl tests of robots.txt, spacing at the site, backing off and budgets, with
Scrapy's Twisted reactor and without it (``TWISTED_REACTOR_ENABLED = False``, Scrapy
2.19's asyncio-native mode, where importing the reactor is forbidden).  Each runs a
crawler process as a user would; the modes the installed Scrapy has are tested."""

from __future__ import annotations

import itertools
import json

import pytest

from tests.helpers import WITHOUT_REACTOR
from tests.processes import run_crawl
from tests.server import Route

MODES = ["twisted-reactor"]
if WITHOUT_REACTOR:
    MODES.append("no-reactor")

pytestmark = [pytest.mark.subprocess, pytest.mark.parametrize("mode", MODES)]


def run(mode, urls, **settings):
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": "TestBot/1.0",
        **settings,
    }
    if mode == "no-reactor":
        settings["TWISTED_REACTOR_ENABLED"] = False
    result = run_crawl(json.dumps(settings), *urls)
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads(result.stdout.strip().splitlines()[-1])
    assert stats["test/twisted_reactor"] is (mode == "twisted-reactor")
    assert stats["finish_reason"] == "finished"
    return stats


def starts(site, prefix="/"):
    return [hit.time for hit in site.hits if hit.path.startswith(prefix)]


def test_robots_txt_crawl_delay_and_a_daily_budget(site, tmp_path, mode):
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.3\nDisallow: /private\n")
    urls = [f"{site.url}/p/{n}" for n in range(5)] + [f"{site.url}/private/x"]
    stats = run(
        mode,
        urls,
        DOMAINBUDGET_ENABLED=True,
        DOMAINBUDGET_SQLITE_PATH=str(tmp_path / "budget.sqlite"),
        DOMAINBUDGET_POLICY={"default_policy": {"max_pages_per_day": 3}},
    )
    assert site.count("/robots.txt") == 1
    assert not any(path.startswith("/private") for path in site.paths())
    assert len(starts(site, "/p/")) == 3  # the budget
    gaps = [b - a for a, b in itertools.pairwise(starts(site))]  # robots.txt included
    assert min(gaps) >= 0.3
    assert stats["rfc9309/forbidden"] == 1
    assert stats["domainbudget/dropped"] == 2


@pytest.mark.parametrize(
    "queue",
    [
        "scrapy_rfc9309.pqueues.HostReadyPriorityQueue",
        "scrapy.pqueues.DownloaderAwarePriorityQueue",
    ],
)
def test_a_retry_after_holds_the_host(site, mode, queue):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/", Route(status=429, headers={"Retry-After": "1"}))
    run(
        mode,
        [f"{site.url}/p/{n}" for n in range(3)],
        RETRY_ENABLED=True,
        SCHEDULER_PRIORITY_QUEUE=queue,
        CONCURRENT_REQUESTS_PER_DOMAIN=1,
    )
    pages = starts(site, "/p/")
    assert len(pages) == 4  # the 429, its retry, two more
    assert pages[1] - pages[0] >= 1.0


def test_a_broad_crawl_keeps_every_hosts_crawl_delay(mode):
    """100 hosts on 127.0.x.y crawled at once, each with a Crawl-delay: on every
    host's own clock, no two requests (robots.txt included) closer than it."""
    from tests.broad_site import BroadSite, addresses, robots_and_pages

    respond = robots_and_pages("User-agent: *\nCrawl-delay: 0.3\n")
    site = BroadSite(addresses(100, first=900), respond, page_time=0.02)
    try:
        urls = [site.url(host, f"/p/{n}") for n in range(2) for host in site.hosts]
        run(mode, urls, CONCURRENT_REQUESTS=32)
    finally:
        site.close()
    gaps = site.gaps()
    assert len(gaps) == 100 * 2  # robots.txt, then each page
    assert min(gap for gap, *_ in gaps) >= 0.3
