"""The robots middleware in real crawls against a local server (RFC 9309 §2.3, §2.4).

Assertions are on what the *server* received."""

import pytest
import pytest_twisted

from tests.crawl import crawl

ROBOTS = b"User-agent: *\nDisallow: /private\n\nUser-agent: TestBot\nDisallow: /secret\nAllow: /secret/ok\n"


def pages(site, *paths):
    return [site.url + path for path in paths]


@pytest_twisted.ensureDeferred
async def test_rfc_2_3_1_2xx_is_obeyed_for_the_crawlers_group(site):
    site.route("/robots.txt", body=ROBOTS)
    crawler = await crawl(pages(site, "/a", "/secret/x", "/secret/ok", "/private"))
    assert sorted(site.paths()) == ["/a", "/private", "/robots.txt", "/secret/ok"]
    assert crawler.stats.get_value("rfc9309/forbidden") == 1
    assert crawler.stats.get_value("rfc9309/request_count") == 1
    assert crawler.stats.get_value("rfc9309/response_status_count/200") == 1
