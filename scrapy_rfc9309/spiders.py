"""Spider mixins that read what the robots middleware already has."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy import Request

from ._shared import authority_of, offers
from .downloadermiddlewares.robotstxt import RobotsTxtMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["SitemapsFromRobotsMixin"]


def robots_middleware(crawler: Crawler) -> RobotsTxtMiddleware | None:
    """The crawl's robots middleware, if it runs one."""
    middleware: RobotsTxtMiddleware | None = offers(crawler).robots
    return middleware


class SitemapsFromRobotsMixin:
    """For a ``SitemapSpider``: a ``sitemap_urls`` entry that names a robots.txt is
    read from the robots middleware's copy (fetched once, or kept from an earlier
    crawl), not downloaded a second time::

        class MySpider(SitemapsFromRobotsMixin, SitemapSpider):
            sitemap_urls = ["https://example.com/robots.txt"]

    The robots.txt entries of ``sitemap_urls`` are replaced by the sitemaps the copy
    names, then ``SitemapSpider`` starts as usual.  Without the package's robots
    middleware, the spider downloads robots.txt itself, as usual.
    """

    crawler: Crawler
    sitemap_urls: list[str]

    async def start(self) -> AsyncIterator[Any]:
        middleware = robots_middleware(self.crawler)
        if middleware is not None:
            urls = []
            for url in self.sitemap_urls:
                if not url.endswith("/robots.txt"):
                    urls.append(url)
                    continue
                request = Request(url)
                entry = await middleware.entry(authority_of(request), request)
                sitemaps = entry.robots.sitemaps if entry.robots is not None else ()
                urls.extend(urljoin(url, sitemap) for sitemap in sitemaps)
            self.sitemap_urls = urls
        async for item in super().start():  # type: ignore[misc]
            yield item
