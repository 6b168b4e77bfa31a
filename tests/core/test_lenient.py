"""LENIENT mode (not RFC 9309): what Google's parser also accepts.

Every behaviour here is a deviation from the RFC, switched off with
``RobotsTxt.parse(body, lenient=False)``; each test checks both modes.
"""

import pytest

from scrapy_rfc9309 import RobotsTxt

BOT = "MyBot"


@pytest.mark.parametrize("key", ["dissallow", "dissalow", "disalow", "diasllow", "disallaw"])
def test_lenient_disallow_typos(key):
    body = f"User-agent: *\n{key}: /x\n"
    assert not RobotsTxt.parse(body).allowed("/x", BOT)
    assert RobotsTxt.parse(body, lenient=False).allowed("/x", BOT)


@pytest.mark.parametrize("key", ["useragent", "user agent"])
def test_lenient_user_agent_typos(key):
    body = f"{key}: *\nDisallow: /x\n"
    assert not RobotsTxt.parse(body).allowed("/x", BOT)
    assert RobotsTxt.parse(body, lenient=False).allowed("/x", BOT)


def test_lenient_missing_colon_with_exactly_two_words():
    body = "User-agent *\nDisallow /x\nDisallow /y extra\n"
    lenient = RobotsTxt.parse(body)
    assert not lenient.allowed("/x", BOT)
    assert lenient.allowed("/y", BOT), "three words are not a record"
    assert RobotsTxt.parse(body, lenient=False).allowed("/x", BOT)


def test_lenient_sitemap_and_crawl_delay_spellings():
    body = "User-agent: *\nCrawldelay: 4\nSite-map: https://e.com/s.xml\n"
    assert RobotsTxt.parse(body).crawl_delay(BOT) == 4
    assert RobotsTxt.parse(body).sitemaps == ["https://e.com/s.xml"]
    strict = RobotsTxt.parse(body, lenient=False)
    assert strict.crawl_delay(BOT) is None and strict.sitemaps == []


def test_lenient_lines_are_counted():
    assert RobotsTxt.parse("useragent: *\nDisallow /x\nAllow: /y\n").lenient_lines == 2
    assert RobotsTxt.parse("User-agent: *\nAllow: /y\n").lenient_lines == 0


def test_rfc_strict_mode_still_parses_standard_files():
    r = RobotsTxt.parse("User-agent: *\nDisallow: /x\n", lenient=False)
    assert not r.allowed("/x", BOT)
