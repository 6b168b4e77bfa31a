"""The demo spider: crawls the bundled site (started on 127.0.0.1 for the run) and
ends with a report of what scrapy_rfc9309 did, checked against the site's own log."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import scrapy
from scrapy import signals
from scrapy.exceptions import IgnoreRequest

from scrapy_rfc9309 import CrawlDelayThrottle

from ..site import DemoSite


class DemoSpider(scrapy.Spider):
    name = "demo"

    async def start(self):
        self.site = DemoSite()
        self.fetched: list[str] = []
        self.blocked: dict[str, str] = {}  # URL -> why robots.txt blocks it
        self.over_budget: Counter[str] = Counter()  # reason -> requests dropped
        yield scrapy.Request(f"{self.site.shop.url}/", errback=self.dropped)

    def parse(self, response):
        self.fetched.append(response.url)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, errback=self.dropped)

    def dropped(self, failure):
        if not failure.check(IgnoreRequest):
            return
        message = str(failure.value)
        if message.startswith("Forbidden by robots.txt: "):
            self.blocked[failure.request.url] = message.removeprefix("Forbidden by robots.txt: ")
        elif message.startswith("Daily budget"):
            self.over_budget[message] += 1

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        # After Scrapy's own closing lines: the report is the last thing printed.
        crawler.signals.connect(spider.print_report, signal=signals.engine_stopped)
        return spider

    def closed(self, reason: str) -> None:
        self.report = self.make_report()
        self.site.close()

    def print_report(self) -> None:
        stats = self.crawler.stats
        self.report["held"] = (
            stats.get_value("backoff/hosts_held", 0),
            stats.get_value("backoff/held_seconds", 0.0),
        )
        print(format_report(self.report), flush=True)

    def make_report(self) -> dict[str, Any]:
        throttle = next(
            (c for c in self.crawler.extensions.middlewares if isinstance(c, CrawlDelayThrottle)),
            None,
        )
        shop = self.site.shop
        times = [hit.time for hit in shop.hits]  # robots.txt included: all requests count
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        return {
            "fetched": len(self.fetched),
            "shop_pages_served": len(shop.pages()),
            "partner_pages_served": len(self.site.partner.pages()),
            "blocked": dict(sorted(self.blocked.items())),
            "over_budget": dict(self.over_budget),
            "delay": throttle.floor("127.0.0.1") if throttle else None,
            "gaps": gaps,
        }


def format_report(report: dict[str, Any]) -> str:
    lines = [
        "",
        "scrapy_rfc9309 demo report",
        f"  pages fetched:           {report['fetched']}"
        f" (the bookshop served {report['shop_pages_served']},"
        f" the partner site {report['partner_pages_served']})",
        f"  blocked by robots.txt:   {len(report['blocked'])}",
    ]
    lines += [f"    {url}  <- {why}" for url, why in report["blocked"].items()]
    dropped = sum(report["over_budget"].values())
    lines.append(f"  dropped by the budget:   {dropped}")
    lines += [f"    {count} x {why}" for why, count in report["over_budget"].items()]
    gaps = report["gaps"]
    if report["delay"] is not None and gaps:
        lines.append(
            f"  spacing at 127.0.0.1:    at least {report['delay']:g} s applied;"
            f" observed between {len(gaps) + 1} requests (robots.txt and"
            f" {report['shop_pages_served']} pages): min {min(gaps):.2f} s,"
            f" mean {sum(gaps) / len(gaps):.2f} s"
        )
    hosts, seconds = report.get("held", (0, 0.0))
    if hosts:
        lines.append(
            f"  held by backing off:     {hosts} host(s), {seconds:.1f} s in all"
            " (they answered 429/503: no request to them meanwhile)"
        )
    return "\n".join(lines) + "\n"
