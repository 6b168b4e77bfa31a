"""Spider mixins that read what the robots middleware already has."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy import Request

from ._shared import authority_of
from .downloadermiddlewares.robotstxt import RobotsTxtMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["SitemapsFromRobotsMixin"]


def robots_middleware(crawler: Crawler) -> RobotsTxtMiddleware | None:
    """The crawl's robots middleware, if it runs one."""
    for middleware in crawler.engine.downloader.middleware.middlewares:
        if isinstance(middleware, RobotsTxtMiddleware):
            return middleware
    return None


class SitemapsFromRobotsMixin:
    """For a ``SitemapSpider``: a ``sitemap_urls`` entry that names a robots.txt is
    read from the robots middleware's copy (fetched once, or kept from an earlier
    crawl), not downloaded a second time::

        class MySpider(SitemapsFromRobotsMixin, SitemapSpider):
            sitemap_urls = ["https://example.com/robots.txt"]

    Without the package's robots middleware, the spider downloads it as usual.
    """

    crawler: Crawler
    sitemap_urls: list[str]
    _parse_sitemap: Any

    async def start(self) -> AsyncIterator[Any]:
        middleware = robots_middleware(self.crawler)
        for url in self.sitemap_urls:
            if middleware is None or not url.endswith("/robots.txt"):
                yield Request(url, self._parse_sitemap)
                continue
            request = Request(url)
            entry = await middleware.entry(authority_of(request), request)
            for sitemap in entry.robots.sitemaps if entry.robots is not None else ():
                yield Request(urljoin(url, sitemap), callback=self._parse_sitemap)
