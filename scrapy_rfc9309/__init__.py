"""RFC 9309 robots.txt, per-domain daily budgets and Crawl-delay for Scrapy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .robots import RobotsTxt, Verdict, product_token

__version__ = "0.2.0"

__all__ = [
    "Addon",
    "CrawlDelayGate",
    "CrawlDelayThrottle",
    "DomainBudgetMiddleware",
    "PageDirectivesMiddleware",
    "RobotParser",
    "RobotsTxt",
    "RobotsTxtDecompressionMiddleware",
    "RobotsTxtMiddleware",
    "SitemapsFromRobotsMixin",
    "StartPaceMiddleware",
    "Verdict",
    "__version__",
    "product_token",
]

# The Scrapy components are imported lazily so that ``from scrapy_rfc9309 import
# RobotsTxt`` works without Scrapy installed and imports no Twisted.
_LAZY = {
    "Addon": "scrapy_rfc9309.addon",
    "CrawlDelayGate": "scrapy_rfc9309.extensions.crawldelay",
    "CrawlDelayThrottle": "scrapy_rfc9309.extensions.crawldelay",
    "DomainBudgetMiddleware": "scrapy_rfc9309.downloadermiddlewares.budget",
    "PageDirectivesMiddleware": "scrapy_rfc9309.spidermiddlewares.pagedirectives",
    "RobotParser": "scrapy_rfc9309.robotparser",
    "RobotsTxtMiddleware": "scrapy_rfc9309.downloadermiddlewares.robotstxt",
    "RobotsTxtDecompressionMiddleware": "scrapy_rfc9309.downloadermiddlewares.robotstxt",
    "SitemapsFromRobotsMixin": "scrapy_rfc9309.spiders",
    "StartPaceMiddleware": "scrapy_rfc9309.spidermiddlewares.startpace",
}

if TYPE_CHECKING:
    from .addon import Addon
    from .downloadermiddlewares.budget import DomainBudgetMiddleware
    from .downloadermiddlewares.robotstxt import (
        RobotsTxtDecompressionMiddleware,
        RobotsTxtMiddleware,
    )
    from .extensions.crawldelay import CrawlDelayGate, CrawlDelayThrottle
    from .robotparser import RobotParser
    from .spidermiddlewares.pagedirectives import PageDirectivesMiddleware
    from .spidermiddlewares.startpace import StartPaceMiddleware
    from .spiders import SitemapsFromRobotsMixin


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
