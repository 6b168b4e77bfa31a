"""``ROBOTSTXT_PARSER`` adapter: RFC 9309 matching inside Scrapy's built-in middleware.

    ROBOTSTXT_PARSER = "scrapy_rfc9309.RobotParser"

This fixes matching only (groups, longest match, wildcards, percent-encoding);
Scrapy's built-in middleware still decides what a 5xx or a timeout means, caches
forever and lets waiting requests through unchecked.  ``RobotsTxtMiddleware`` of
this package fixes those too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.robotstxt import RobotParser as ScrapyRobotParser

from ._settings import ROBOTS_DEFAULTS, flag, with_defaults
from .robots import RobotsTxt

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class RobotParser(ScrapyRobotParser):
    def __init__(self, robots: RobotsTxt) -> None:
        self.robots = robots

    @classmethod
    def from_crawler(cls, crawler: Crawler | None, robotstxt_body: bytes) -> Self:
        """Parse *robotstxt_body*; *crawler* gives ``RFC9309_LENIENT`` (``None``, as
        Scrapy's own parser tests pass it: the default, lenient)."""
        lenient = crawler is None or flag(
            with_defaults(crawler.settings, ROBOTS_DEFAULTS), "RFC9309_LENIENT"
        )
        return cls(RobotsTxt.parse(robotstxt_body, lenient=lenient))

    @classmethod
    def from_robots(cls, robots: RobotsTxt | None) -> Self:
        return cls(robots if robots is not None else RobotsTxt([], []))

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self.robots.allowed(_text(url), _text(user_agent))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        return self.robots.crawl_delay(_text(user_agent))

    def delay(self, user_agent: str | bytes) -> float | None:
        """The larger of Crawl-delay and the Request-rate's delay, in seconds."""
        return self.robots.delay(_text(user_agent))
