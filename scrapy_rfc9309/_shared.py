"""Where this package's Scrapy components meet: the words they share (the
``Request.meta`` keys, the robots.txt cache key, the crawler's product token, the
``robots_parsed`` signal) and, per crawler, what one component offers the others.
No component imports another's modules; each imports this one."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol
from urllib.parse import SplitResult

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached

from .robots import product_token

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from .downloadermiddlewares.robotstxt import RobotsTxtMiddleware
    from .extensions.crawldelay import CrawlDelayThrottle
    from .robots import RobotsEntry

#: Scrapy's ``robots_parsed`` signal (Scrapy >= 2.18); with an older Scrapy, a signal
#: of this package's own that its robots middleware sends and its throttle receives.
ROBOTS_PARSED: object = getattr(signals, "robots_parsed", object())

#: Request.meta key marking the package's own robots.txt requests: the authority
#: whose robots.txt they fetch (a redirect's hops included).
META_ROBOTS = "rfc9309_robots"
#: Request.meta key set on allowed requests: the robots.txt delay for the crawler, if any.
META_DELAY = "rfc9309_robots_delay"
#: Request.meta key set on requests (and so their responses) whose site states usage
#: preferences: ``{"content-usage": {...}, "content-signal": {...}, "lines": [...]}``.
META_PREFERENCES = "rfc9309_preferences"


class RobotsFetchPutOff(IgnoreRequest):
    """The gate put a robots.txt request off: it would wait for its unit longer than
    a page may (a hold, a Crawl-delay), *wait* seconds.  The fetch ends undecided;
    the pages that waited for it go back to the scheduler, and the next fetch of the
    authority waits (see ``Offers.robots_fetch_delay``), then goes on from this
    request."""

    def __init__(self, message: str = "", wait: float = 0.0) -> None:
        super().__init__(message)
        self.wait = wait


def authority_of(request: Request) -> str:
    """``scheme://host[:port]``: the robots.txt cache key (RFC 9309 §2.3).

    http and https, and two ports of one host, are different authorities.
    """
    parsed = urlparse_cached(request)
    return _authority(parsed.scheme, parsed.netloc)


@lru_cache(maxsize=1024)  # asked several times for each request: once a host, mostly
def _authority(scheme: str, netloc: str) -> str:
    parsed = SplitResult(scheme, netloc, "", "", "")
    host = parsed.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parsed.port
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")


def crawler_token(configured: str | None, request: Request, default_user_agent: str) -> str:
    """``ROBOTSTXT_USER_AGENT`` if set, else the product token of the ``User-Agent``
    header the request is sent with (``MyBot/1.0 (+http://x)`` -> ``mybot``), RFC 9309
    §2.2.1."""
    if configured:
        return product_token(configured)
    header = request.headers.get(b"User-Agent")
    user_agent = header.decode("latin-1") if header else default_user_agent
    return product_token(user_agent)


class BudgetRefusal(Protocol):
    """The budget middleware's ``refusal``: why *request* would be refused today, or
    ``None``; counted as a drop unless *count* is false."""

    def __call__(self, request: Request, count: bool = True) -> Awaitable[str | None]: ...


class Offers:
    """What the components of one crawl offer each other (``None``: not running)."""

    def __init__(self) -> None:
        #: The budget middleware's answer to "would this request be refused today?",
        #: without reserving anything: why, or ``None`` (counted as a drop unless
        #: called with ``count=False``).  The robots middleware asks it before fetching
        #: a robots.txt, so that a domain whose budget is spent costs its site no
        #: robots.txt request.
        self.budget_refusal: BudgetRefusal | None = None
        #: The budget middleware's memory of it: whether *request*'s domain was found
        #: spent today (no read; a page given back since makes it not spent).  The
        #: scheduler's queue hands such requests out at once: they never wait.
        self.budget_spent: Callable[[Request], bool] | None = None
        #: Called by the budget middleware when a domain's budget is first found
        #: spent: the queue hands out at once the requests it holds for it.
        self.on_budget_spent: list[Callable[[], None]] = []
        #: How many domains' budgets are spent today, as far as this process saw.
        self.budgets_spent: Callable[[], int] | None = None
        #: How many robots.txt fetches are in flight (requests wait for each).
        self.robots_fetching: Callable[[], int] | None = None
        #: How many requests the fleet's shared queue holds, as this process last
        #: saw (its units may be ready for other processes only, or held by them).
        self.fleet_queue_left: Callable[[], int] | None = None
        #: The robots middleware's answer to "would this request wait for its site's
        #: robots.txt?" (it obeys one, and none is at hand, fresh).
        self.robots_unread: Callable[[Request], bool] | None = None
        #: The robots middleware starts reading a request's robots.txt (from the kept
        #: copy or the site) unless that is under way, and calls the function given
        #: once it is decided, whatever the outcome, in a later turn of the event loop
        #: (never within the call): the scheduler's queue keeps the request
        #: meanwhile, instead of it holding a place of the downloader.
        self.robots_read_ahead: Callable[[Request, Callable[[], None]], None] | None = None
        #: The robots middleware, for the spiders' sitemaps (``None`` while it is off).
        self.robots: RobotsTxtMiddleware | None = None
        #: The Crawl-delay throttle, for its gate (``None`` while it is off).
        self.throttle: CrawlDelayThrottle | None = None
        #: The robots middleware's answer to "is this request refused by a robots.txt
        #: already at hand?" (no fetch): the scheduler's queue hands such requests out
        #: at once, whatever their host's readiness, since they never reach the site.
        self.robots_refuses: Callable[[Request], bool] | None = None
        #: Called by the robots middleware when a fetch of an authority's robots.txt
        #: is over, with the entry it gave (``None``: it failed): the gate lets the
        #: authority's unit go on, its floor known; the queue hands out at once the
        #: requests an unreachable robots.txt refuses.
        self.on_robots_decided: list[Callable[[str, RobotsEntry | None], None]] = []
        #: The gate's answer to "would a robots.txt request of this authority wait
        #: for its unit (a hold after a 429/503, a Crawl-delay) longer than a page
        #: waits in the gate?": ``0`` if not, else for how many
        #: seconds the robots middleware obeys the authority's expired copy (with
        #: none to obey, the page waits that long and goes back to the scheduler)
        #: before asking again, rather than send a request that would wait in
        #: Scrapy's downloader all that time (and hold a stop: Scrapy waits for it);
        #: the same while a fetch of it the gate put off would be put off again.
        self.robots_fetch_delay: Callable[[str], float] | None = None
        #: The scheduler's queue: returns once another start request is welcome
        #: (fewer units wait for their robots.txt read than it reads at once, and the
        #: downloader has room), or after *most* seconds whatever it holds.
        self.start_room: Callable[[float], Awaitable[None]] | None = None

    def will_drop(self, request: Request) -> bool:
        """Whether a middleware will drop *request* without reaching its site: a
        robots.txt at hand refuses it, or its domain's budget is spent.  The
        scheduler's queues hand such requests out at once: they wait for nothing."""
        refuses, spent = self.robots_refuses, self.budget_spent
        return (refuses is not None and refuses(request)) or (spent is not None and spent(request))


_OFFERS: weakref.WeakKeyDictionary[Crawler, Offers] = weakref.WeakKeyDictionary()


def offers(crawler: Crawler) -> Offers:
    """The one :class:`Offers` of *crawler*."""
    found = _OFFERS.get(crawler)
    if found is None:
        found = _OFFERS[crawler] = Offers()
    return found
