"""RFC 9309 §2.2.4 other records: Crawl-delay, Request-rate, Sitemap."""

import pytest

from scrapy_rfc9309 import RobotsTxt


def test_rfc_2_2_4_crawl_delay_of_the_applying_group():
    r = RobotsTxt.parse(
        "User-agent: *\nCrawl-delay: 2\nDisallow: /y\n\n"
        "User-agent: slowbot\nCrawl-delay: 10\nDisallow: /x\n"
    )
    assert r.crawl_delay("mybot") == 2
    assert r.crawl_delay("SlowBot/1.0") == 10


def test_rfc_2_1_crawl_delay_between_user_agent_lines_keeps_one_group():
    # Only a user-agent line after rules starts a new group: here "*" and
    # "slowbot" share one group, with both delays (the largest applies).
    r = RobotsTxt.parse("User-agent: *\nCrawl-delay: 2\n\nUser-agent: slowbot\nCrawl-delay: 10\n")
    assert r.crawl_delay("mybot") == 10
    assert r.crawl_delay("slowbot") == 10


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", 1.0),
        ("0.5", 0.5),
        (".25", 0.25),
        ("0", 0.0),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("1e400", None),
        ("abc", None),
        ("1_0", None),
        ("", None),
    ],
)
def test_rfc_2_2_4_crawl_delay_values(value, expected):
    r = RobotsTxt.parse(f"User-agent: *\nCrawl-delay: {value}\n")
    assert r.crawl_delay("mybot") == expected


def test_rfc_2_2_4_largest_crawl_delay_of_merged_groups():
    r = RobotsTxt.parse(
        "User-agent: a\nCrawl-delay: 1\nDisallow: /\nUser-agent: a\nCrawl-delay: 3\n"
    )
    assert r.crawl_delay("a") == 3


def test_rfc_2_2_4_crawl_delay_of_another_group_does_not_apply():
    r = RobotsTxt.parse(
        "User-agent: otherbot\nCrawl-delay: 30\nDisallow: /y\n\nUser-agent: *\nDisallow: /x\n"
    )
    assert r.crawl_delay("mybot") is None
    assert r.delay("mybot") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1/5", (1, 5.0)),
        ("1/5s", (1, 5.0)),
        ("3/1m", (3, 60.0)),
        ("1/1h", (1, 3600.0)),
        ("2 / 10", (2, 10.0)),
        ("1/10 0600-0845", (1, 10.0)),
        ("0/5", None),
        ("1/0", None),
        ("x/5", None),
        ("1/5x", None),
    ],
)
def test_rfc_2_2_4_request_rate_values(value, expected):
    r = RobotsTxt.parse(f"User-agent: *\nRequest-rate: {value}\n")
    assert r.request_rate("mybot") == expected


def test_rfc_2_2_4_delay_is_the_larger_of_crawl_delay_and_request_rate():
    r = RobotsTxt.parse("User-agent: *\nCrawl-delay: 1\nRequest-rate: 1/2\n")
    assert r.delay("mybot") == 2.0
    r = RobotsTxt.parse("User-agent: *\nCrawl-delay: 3\nRequest-rate: 1/2\n")
    assert r.delay("mybot") == 3.0


def test_rfc_2_2_4_sitemaps_are_collected_file_wide_in_order_without_duplicates():
    r = RobotsTxt.parse(
        "Sitemap: https://e.com/a.xml\nUser-agent: x\nSitemap: https://e.com/b.xml\n"
        "Disallow: /\nsitemap: https://e.com/a.xml\n"
    )
    assert r.sitemaps == ["https://e.com/a.xml", "https://e.com/b.xml"]
