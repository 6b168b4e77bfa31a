"""What several test modules share (the crawl and the servers have their own modules:
``tests/crawl.py``, ``tests/server.py``, ``tests/broad_site.py``)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import scrapy
from hypothesis import settings
from packaging.version import Version
from twisted.internet.defer import Deferred

from tests.budget.process_worker import DAY

__all__ = [
    "BUDGET",
    "DAY",
    "REFUSE_ROBOTS_WRITES",
    "WITHOUT_REACTOR",
    "examples",
    "on_loop",
    "page_paths",
    "policy",
]

#: Whether crawls run without Twisted's reactor too (``TWISTED_REACTOR_ENABLED =
#: False``): Scrapy's asyncio-native mode downloads over HTTP from 2.19 on (with
#: httpx, not a dependency, before).
WITHOUT_REACTOR = Version(scrapy.__version__) >= Version("2.19")

#: Set by ``make test-fast`` (the quick loop): property tests try a tenth of their
#: examples there; ``make test`` tries them all.
QUICK = bool(os.environ.get("TESTS_QUICK"))


def examples(count: int, **more: Any) -> settings:
    """Hypothesis settings for a property test of *count* examples (fewer in the
    quick loop), without a deadline (a loaded machine is no failure)."""
    return settings(max_examples=max(count // 10, 10) if QUICK else count, deadline=None, **more)


#: Settings of a crawl with the budget middleware (and the package's robots one).
BUDGET: dict[str, Any] = {
    "DOMAINBUDGET_ENABLED": True,
    "DOWNLOADER_MIDDLEWARES": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_rfc9309.RobotsTxtMiddleware": 100,
        "scrapy_rfc9309.RobotsTxtDecompressionMiddleware": 595,
        "scrapy_rfc9309.DomainBudgetMiddleware": 950,
    },
}

#: SQL that makes a robots.txt cache file refuse every write, still readable.
REFUSE_ROBOTS_WRITES = (
    "CREATE TRIGGER refuse BEFORE INSERT ON robots"
    " BEGIN SELECT RAISE(ABORT, 'the disk refuses'); END"
)


def policy(pages: int = 0, requests: int = 0) -> dict[str, Any]:
    """A budget policy whose default allows *pages* and *requests* a day (0: no limit)."""
    return {"default_policy": {"max_requests_per_day": requests, "max_pages_per_day": pages}}


def page_paths(site: Any) -> list[str]:
    """The page paths (``/p/...``) the site was asked for, in order."""
    return [path for path in site.paths() if path.startswith("/p/")]


def on_loop(coroutine: Any) -> Deferred[Any]:
    """*coroutine* as a task of the reactor's asyncio loop, as Scrapy runs the middleware."""
    return Deferred.fromFuture(asyncio.ensure_future(coroutine))
