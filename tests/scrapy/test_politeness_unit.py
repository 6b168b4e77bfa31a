"""CRAWLDELAY_UNIT at the site's clock: many host names of one site, served from one
address.  The site is an HTTP proxy that answers every request itself, so that any
host name reaches it without DNS; it records when each request arrived, and for
which host."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
import pytest_twisted

from tests.crawl import crawl

CRAWL_DELAY = 0.3
SUBDOMAINS = [f"s{n}.example.com" for n in range(5)]


class ProxySite:
    """Every site, for a crawler that uses it as its HTTP proxy."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str, str]] = []  # (time, host, path)
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                arrived = time.monotonic()
                url = urlsplit(self.path)  # a proxy gets the absolute URL
                site.arrivals.append((arrived, url.hostname or "", url.path))
                if url.path == "/robots.txt":
                    body = f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode()
                else:
                    body = b"<html><body>page</body></html>"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def gaps(self) -> list[float]:
        """The gaps between consecutive arrivals, whatever their host."""
        times = sorted(arrival for arrival, _, _ in self.arrivals)
        return [later - earlier for earlier, later in itertools.pairwise(times)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy_site(monkeypatch):
    site = ProxySite()
    monkeypatch.setenv("http_proxy", site.url)  # read by Scrapy's HttpProxyMiddleware
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    yield site
    site.close()


def urls():
    return [f"http://{host}/p/{n}" for n in range(2) for host in SUBDOMAINS]


@pytest.mark.parametrize(
    "queue",
    [
        "scrapy_rfc9309.pqueues.HostReadyPriorityQueue",
        # Scrapy's own hands out every host's requests at once: the gate alone keeps
        # the site's spacing, robots.txt fetches included.
        "scrapy.pqueues.DownloaderAwarePriorityQueue",
    ],
    ids=["host-ready-queue", "scrapys-queue"],
)
@pytest_twisted.ensureDeferred
async def test_with_the_domain_as_unit_its_hosts_share_one_crawl_delay(proxy_site, queue):
    crawler = await crawl(
        urls(),
        ADDONS={"scrapy_rfc9309.Addon": 500},
        CRAWLDELAY_UNIT="domain",
        SCHEDULER_PRIORITY_QUEUE=queue,
    )
    assert len(crawler.spider.seen) == 10
    assert len(proxy_site.arrivals) == 15  # 5 robots.txt, 10 pages
    # One site: every request, robots.txt included, a Crawl-delay after the previous
    # one's start at least (end to start: its response time comes on top).
    assert min(proxy_site.gaps()) >= CRAWL_DELAY


@pytest_twisted.ensureDeferred
async def test_with_the_host_as_unit_the_site_gets_its_hosts_at_once(proxy_site):
    crawler = await crawl(urls(), ADDONS={"scrapy_rfc9309.Addon": 500})
    assert len(crawler.spider.seen) == 10
    assert min(proxy_site.gaps()) < CRAWL_DELAY  # each host is spaced on its own


@pytest_twisted.ensureDeferred
async def test_a_domain_without_a_public_suffix_is_said_once_and_crawldelay_sites_joins_it(
    proxy_site, caplog
):
    """``.test`` is no public suffix: under the domain unit, each host is its own unit
    (said once), until CRAWLDELAY_SITES names the site."""
    urls = [
        f"http://{host}/p/{n}" for n in range(2) for host in ("a.example.test", "b.example.test")
    ]
    with caplog.at_level(logging.WARNING):
        await crawl(urls, ADDONS={"scrapy_rfc9309.Addon": 500}, CRAWLDELAY_UNIT="domain")
    said = [r.getMessage() for r in caplog.records if "no public suffix" in r.getMessage()]
    assert len(said) == 1 and "CRAWLDELAY_SITES (e.g. ['example.test'])" in said[0]
    assert min(proxy_site.gaps()) < CRAWL_DELAY  # two units
    proxy_site.arrivals.clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await crawl(
            urls,
            ADDONS={"scrapy_rfc9309.Addon": 500},
            CRAWLDELAY_UNIT="domain",
            CRAWLDELAY_SITES=["example.test"],
        )
    assert not [r for r in caplog.records if "no public suffix" in r.getMessage()]
    assert len(proxy_site.arrivals) == 6  # 2 robots.txt, 4 pages
    assert min(proxy_site.gaps()) >= CRAWL_DELAY  # one site, robots.txt included
