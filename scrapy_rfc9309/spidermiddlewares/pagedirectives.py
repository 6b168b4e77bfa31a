"""Spider middleware: page-level robots directives (``X-Robots-Tag``,
``<meta name="robots">`` in the page's head) for the crawler's product token or for
all.

``nofollow`` (or ``none``) stops the links of a page from being followed: the
requests the spider yields from that response to a URL the page links to (an
``<a>`` or ``<area>`` ``href`` of an HTML page, fragment aside) are dropped, each
with a DEBUG line, and counted (``rfc9309/nofollow_dropped``; one INFO line at close
says how many).  Requests the spider builds otherwise (a form's submission, an API's
next page, a JSON response's URLs) are not links and go on, as do those with
``dont_obey_robotstxt`` in their meta; ``RFC9309_NOFOLLOW = False`` keeps them all.
Every directive found (``noindex``, ``noai``, ...) is put on the response's meta,
``response.meta["rfc9309_page_directives"]``, for pipelines to read.
``RFC9309_PAGE_DIRECTIVES = False`` turns the middleware off; so does
``ROBOTSTXT_OBEY = False``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from scrapy import Request, Selector, signals
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor

from .._settings import (
    PAGE_DEFAULTS,
    configured_token,
    flag,
    report_configuration_errors_in_one_line,
    with_defaults,
)
from ..robots import html_head, page_directives

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

#: Response.meta key: the page-level directives that apply to the crawler (sorted).
META_PAGE_DIRECTIVES = "rfc9309_page_directives"


class PageDirectivesMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        report_configuration_errors_in_one_line()
        settings = with_defaults(crawler.settings, PAGE_DEFAULTS)
        if not flag(settings, "ROBOTSTXT_OBEY") or not flag(settings, "RFC9309_PAGE_DIRECTIVES"):
            raise NotConfigured
        self.stats = crawler.stats
        self.nofollow = flag(settings, "RFC9309_NOFOLLOW")
        self.token = configured_token(settings)
        # Only a head that names robots or the crawler is parsed (most name neither),
        # and only the head: a page costs what its head does, whatever its length.
        self._names = [b"robots", *([self.token.encode()] if self.token else [])]
        names = b"|".join(re.escape(name) for name in self._names)
        self._names_in_meta = re.compile(rb"""name\s*=\s*["']?\s*(?:%s)\b""" % names).search
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _spider_closed(self, spider: Any = None) -> None:
        """One INFO line at close if links were not followed (each has a DEBUG line)."""
        dropped = self.stats.get_value("rfc9309/nofollow_dropped")
        if dropped:
            logger.info(
                "nofollow: %d links not followed, on pages that said nofollow "
                "(RFC9309_NOFOLLOW = False follows them)",
                dropped,
            )

    def process_spider_input(self, response: Response, spider: Any = None) -> None:
        """Before the callback runs: the directives go on the response's meta."""
        found = self._directives(response)
        if found:
            response.meta[META_PAGE_DIRECTIVES] = sorted(found)

    def _follows(self, response: Response) -> bool:
        """False if the links of *response* are not to be followed."""
        found = response.meta.get(META_PAGE_DIRECTIVES) or ()
        return not (self.nofollow and "nofollow" in found)

    def _directives(self, response: Response) -> set[str]:
        headers = [value.decode("latin-1") for value in response.headers.getlist("X-Robots-Tag")]
        metas: list[tuple[str, str]] = []
        if isinstance(response, HtmlResponse):
            head = html_head(response.body)
            lowered = head.lower()
            if any(name in lowered for name in self._names) and self._names_in_meta(lowered):
                text = head.decode(response.encoding, "replace")
                for tag in Selector(text=text, type="html").xpath("//meta[@name][@content]"):
                    metas.append((tag.attrib["name"], tag.attrib["content"]))
        return page_directives(headers, metas, self.token)

    def _refused(self, response: Response) -> Callable[[Any], bool] | None:
        """None if the links of *response* may be followed; else the test of each
        output of its callback: True for a request following one of them (counted,
        and logged at DEBUG).  The page's links are read at its first request."""
        if self._follows(response):
            return None
        links: set[str] | None = None

        def refused(each: Any) -> bool:
            nonlocal links
            if not isinstance(each, Request) or each.meta.get("dont_obey_robotstxt"):
                return False
            if links is None:
                links = page_links(response)
            if each.url.split("#", 1)[0] not in links:
                return False
            self.stats.inc_value("rfc9309/nofollow_dropped")
            logger.debug("Not followed (nofollow on %s): %s", response.url, each)
            return True

        return refused

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterable[Any]:
        refused = self._refused(response)
        return result if refused is None else (each for each in result if not refused(each))

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        refused = self._refused(response)
        async for each in result:
            if refused is None or not refused(each):
                yield each


#: The links of a page, as Scrapy's ``response.follow`` would request them (every
#: extension: a linked PDF is a link too).
_LINKS = LinkExtractor(tags=("a", "area"), attrs=("href",), deny_extensions=[], canonicalize=False)


def page_links(response: Response) -> set[str]:
    """The URLs an HTML *response* links to (its ``<a>`` and ``<area>`` ``href``s),
    without fragment."""
    if not isinstance(response, HtmlResponse):
        return set()
    return {link.url.split("#", 1)[0] for link in _LINKS.extract_links(response)}
