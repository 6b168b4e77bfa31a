"""Run a real Scrapy crawl in the test's reactor."""

from __future__ import annotations

from typing import Any

import scrapy
from scrapy.crawler import Crawler, CrawlerRunner

BASE_SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": True,
    "DOWNLOADER_MIDDLEWARES": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_rfc9309.RobotsTxtMiddleware": 100,
    },
    "USER_AGENT": "TestBot/1.0 (+https://example.com/bot)",
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": False,
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
    "DOWNLOAD_DELAY": 0,
    "RETRY_ENABLED": False,
}


class ListSpider(scrapy.Spider):
    """Requests the URLs it is given; records the URLs of the responses it gets."""

    name = "list"
    urls: list[str] = []

    async def start(self):
        for url in self.urls:
            yield scrapy.Request(url, callback=self.parse, dont_filter=True, meta=self.meta)

    def parse(self, response):
        self.seen.append(response.url)


async def crawl(urls: list[str], meta: dict[str, Any] | None = None, **settings: Any) -> Crawler:
    """Crawl *urls* with the base settings updated by *settings*; return the crawler
    (its ``stats`` and ``spider.seen`` hold the results)."""
    runner = CrawlerRunner({**BASE_SETTINGS, **settings})
    crawler = runner.create_crawler(ListSpider)
    await crawler.crawl(urls=list(urls), meta=dict(meta or {}), seen=[])
    return crawler
