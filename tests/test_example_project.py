"""The example project: its demo crawl against the bundled site, the report's
numbers checked against what the site's servers received, and the commands a
user types (``scrapy list``, ``scrapy crawl demo``, ``make fleet-demo``'s)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest_twisted
from scrapy.crawler import CrawlerRunner
from scrapy.settings import Settings

PROJECT = Path(__file__).resolve().parent.parent / "example_project"


def project_settings():
    sys.path.insert(0, str(PROJECT))
    settings = Settings()
    settings.setmodule("demo.settings", priority="project")
    return settings


@pytest_twisted.ensureDeferred
async def test_the_demo_report_matches_what_the_site_received():
    settings = project_settings()
    from demo.spiders.demo import DemoSpider

    crawler = CrawlerRunner(settings).create_crawler(DemoSpider)
    await crawler.crawl()
    spider = crawler.spider
    report, shop, partner = spider.report, spider.site.shop, spider.site.partner

    # The budget (config/domains.yaml): 8 pages of 127.0.0.1 a day, of the 13 allowed.
    assert report["fetched"] == report["shop_pages_served"] == len(shop.pages()) == 8
    assert sum(report["over_budget"].values()) == 13 - 8
    # robots.txt: DemoBot's group (line 6) forbids /private/ and /drafts/ but
    # allows /drafts/published; the partner's robots.txt answers 503.
    assert report["blocked"] == {
        f"{shop.url}/drafts/new": "Disallow: /drafts/ (line 8)",
        f"{shop.url}/private/admin": "Disallow: /private/ (line 7)",
        f"{partner.url}/": "robots.txt unreachable",
        f"{partner.url}/offers": "robots.txt unreachable",
    }
    assert not {"/drafts/new", "/private/admin"} & set(shop.pages())
    assert [hit.path for hit in partner.hits] == ["/robots.txt"]
    assert shop.hits[0].path == "/robots.txt"
    # Crawl-delay 0.5 for DemoBot, above DOWNLOAD_DELAY = 0.1.
    assert report["delay"] == 0.5
    gaps = report["gaps"]
    assert len(gaps) == len(shop.hits) - 1 and min(gaps) >= 0.45


def test_scrapy_crawl_demo_prints_the_report():
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "demo"],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # as a terminal shows them: logs and report interleaved
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    output = result.stdout
    assert "'finish_reason': 'finished'" in output
    assert "robots.txt report:" in output
    # The report is the last thing printed, after Scrapy's own closing lines.
    report = output[output.index("scrapy_rfc9309 demo report") :]
    assert "Spider closed" not in report and "INFO" not in report
    assert "pages fetched:           8 (the bookshop served 8, the partner site 0)" in report


def test_the_project_lists_both_spiders():
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "list"], cwd=PROJECT, capture_output=True, text=True
    )
    assert result.stdout.split() == ["books", "demo"]


def test_make_fleet_demo_ends_and_reports_what_the_site_saw():
    """``make fleet-demo``'s command: two crawler processes and a redis-server of its
    own, the report read as the user reads it.  (The demo site is one host: the
    process that owns it fetches its pages, so this is no test of the fleet's
    spacing; tests/scrapy/test_fleet.py is.)"""
    result = subprocess.run(
        [sys.executable, "-m", "demo.fleet"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = result.stdout
    assert "robots.txt fetched:      1 time(s) by the whole fleet" in report, report
    responses = re.search(r"responses per process: +(\d+), (\d+)", report)
    assert responses is not None, report
    assert sum(map(int, responses.groups())) >= 9  # the shop's 8 pages and its robots.txt
    assert re.search(r"at the partner site: 1 ", report), report  # its robots.txt only
    smallest = re.search(r"spacing at the shop: +min ([0-9.]+) s", report)
    assert smallest is not None and float(smallest.group(1)) >= 0.5, report
    assert "error:" not in report, report
