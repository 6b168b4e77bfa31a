"""Downloader middleware: fetch each authority's robots.txt and drop what it disallows.

Differences from Scrapy's built-in ``RobotsTxtMiddleware`` (RFC 9309 §2.3-2.4):
the cache key is the authority (scheme + host + port), entries expire, a 429/5xx
or a network error disallows (or reuses the last good copy) instead of allowing
everything, redirects are followed across hosts up to a limit, the download stops
at ``RFC9309_MAX_BYTES``, and every request waiting for a robots.txt is checked
against it (one fetch per authority in flight).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from time import monotonic
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from ..robotparser import RobotParser
from ..robots import FetchOutcome, RobotsEntry, RobotsTxt, outcome_for_status
from ..settings import ROBOTS_DEFAULTS, RobotsSettings, with_defaults
from ..useragent import crawler_token

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

#: Request.meta key marking the middleware's own robots.txt requests.
META_ROBOTS = "rfc9309_robots"
#: Request.meta key set on allowed requests: the robots.txt delay for the crawler, if any.
META_DELAY = "rfc9309_robots_delay"


def authority_of(request: Request) -> str:
    """``scheme://host[:port]``: the robots.txt cache key (RFC 9309 §2.3).

    http and https, and two ports of one host, are different authorities.
    """
    parsed = urlparse_cached(request)
    host = parsed.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parsed.port
    default = {"http": 80, "https": 443}.get(parsed.scheme)
    return f"{parsed.scheme}://{host}" + (f":{port}" if port and port != default else "")


class RobotsTxtMiddleware:
    DOWNLOAD_PRIORITY = 1000

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = RobotsSettings.from_settings(with_defaults(crawler.settings, ROBOTS_DEFAULTS))
        self._default_user_agent: str = crawler.settings.get("USER_AGENT") or ""
        self._cache: OrderedDict[str, RobotsEntry] = OrderedDict()
        self._waiters: dict[str, list[Deferred[RobotsEntry]]] = {}
        self._warned: set[str] = set()
        crawler.signals.connect(self._bytes_received, signal=signals.bytes_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    # -- requests --------------------------------------------------------

    async def process_request(self, request: Request, spider: Any = None) -> None:
        if request.meta.get(META_ROBOTS) or request.url.startswith(("data:", "file:")):
            return
        excluded_by = self.config.excluded(request.url)
        if excluded_by is not None:  # the operator's deny list always wins
            self.stats.inc_value("rfc9309/excluded")
            logger.debug("Excluded by RFC9309_EXCLUDE_PATHS %r: %s", excluded_by, request)
            raise IgnoreRequest(f"Excluded by RFC9309_EXCLUDE_PATHS entry {excluded_by!r}")
        if request.meta.get("dont_obey_robotstxt"):
            return
        authority = authority_of(request)
        entry = await self.entry(authority, request)
        token = crawler_token(self.config.user_agent, request, self._default_user_agent)
        verdict = entry.check(request.url, token)
        if not verdict.allowed:
            self.stats.inc_value("rfc9309/forbidden")
            logger.debug(
                "Forbidden by robots.txt (%s, line %s; %s): %s",
                verdict.rule,
                verdict.line,
                entry.describe(),
                request,
            )
            line = f" (line {verdict.line})" if verdict.line else ""
            raise IgnoreRequest(f"Forbidden by robots.txt: {verdict.rule}{line}")
        delay = entry.delay(token)
        if delay is not None:
            request.meta[META_DELAY] = delay

    async def entry(self, authority: str, request: Request) -> RobotsEntry:
        """The robots.txt entry for *authority*, fetched if missing or expired.

        Only one fetch per authority is in flight; requests arriving meanwhile wait
        for it and are all checked against its result.
        """
        cached = self._cache.get(authority)
        if cached is not None and not cached.expired(monotonic()):
            self._cache.move_to_end(authority)
            return cached
        waiters = self._waiters.get(authority)
        if waiters is not None:
            waiter: Deferred[RobotsEntry] = Deferred()
            waiters.append(waiter)
            return await maybe_deferred_to_future(waiter)
        self._waiters[authority] = []
        try:
            entry = await self._fetch(authority, cached)
        except Exception as exc:  # never leave the waiting requests hanging
            for waiter in self._waiters.pop(authority):
                waiter.errback(exc)
            raise
        self._store(authority, entry)
        for waiter in self._waiters.pop(authority):
            waiter.callback(entry)
        return entry

    def _store(self, authority: str, entry: RobotsEntry) -> None:
        self._cache[authority] = entry
        self._cache.move_to_end(authority)
        while len(self._cache) > self.config.cache_size:
            self._cache.popitem(last=False)

    # -- fetching --------------------------------------------------------

    async def _fetch(self, authority: str, previous: RobotsEntry | None) -> RobotsEntry:
        policy = self.config.policy
        url = f"{authority}/robots.txt"
        seen = {url}
        first: Request | None = None  # the request to the authority itself
        for _hop in range(self.config.max_redirects + 1):
            self.stats.inc_value("rfc9309/request_count")
            request = self._robots_request(url)
            first = first or request
            try:
                response = await self.crawler.engine.download_async(request)
            except Exception as exc:  # DNS, connection, timeout, ...: unreachable
                self.stats.inc_value(f"rfc9309/exception_count/{type(exc).__name__}")
                return self._failed(authority, policy.unreachable(monotonic(), previous), exc)
            status = response.status
            self.stats.inc_value(f"rfc9309/response_status_count/{status}")
            outcome = outcome_for_status(status)
            if outcome is FetchOutcome.REDIRECT:
                location = response.headers.get(b"Location")
                if not location:
                    break
                url = urljoin(response.url, location.decode("latin-1"))
                if url in seen:
                    break  # a loop: unavailable
                seen.add(url)
                continue
            if outcome is FetchOutcome.SUCCESS:
                entry = policy.success(self._parse(response), monotonic(), status)
                self.stats.inc_value("rfc9309/success")
                self._warned.discard(authority)
                await self._send_parsed(entry, first)
                return entry
            if outcome is FetchOutcome.UNAVAILABLE:
                self.stats.inc_value("rfc9309/unavailable")
                return policy.unavailable(monotonic(), status)
            return self._failed(authority, policy.unreachable(monotonic(), previous, status))
        # Too many redirects, a loop, or a redirect without Location (§2.3.1).
        self.stats.inc_value("rfc9309/unavailable")
        self.stats.inc_value("rfc9309/redirect_limit")
        return policy.unavailable(monotonic())

    def _robots_request(self, url: str) -> Request:
        return Request(
            url,
            priority=self.DOWNLOAD_PRIORITY,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                META_ROBOTS: True,
                "dont_obey_robotstxt": True,
                "allow_offsite": True,  # allowed_domains must not turn robots.txt off
                "dont_redirect": True,  # followed here, hops counted, across hosts
                "dont_retry": True,  # a failure is retried after RFC9309_FAILURE_TTL
                "handle_httpstatus_all": True,
                "download_timeout": self.config.timeout,
                "download_maxsize": 0,  # the download is cut in _bytes_received instead
                "download_warnsize": 0,
            },
        )

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        if not request.meta.get(META_ROBOTS):
            return
        received = request.meta.get("_rfc9309_received", 0) + len(data)
        request.meta["_rfc9309_received"] = received
        if received > self.config.max_bytes:
            raise StopDownload(fail=False)  # keep what arrived, parse its head

    def _parse(self, response: Response) -> RobotsTxt:
        robots = RobotsTxt.parse(
            response.body, lenient=self.config.lenient, max_bytes=self.config.max_bytes
        )
        if robots.truncated:
            self.stats.inc_value("rfc9309/truncated")
        return robots

    async def _send_parsed(self, entry: RobotsEntry, request: Request) -> None:
        """Scrapy's ``robots_parsed`` signal, with the request to the authority the
        file applies to (the first hop when it was redirected)."""
        await self.crawler.signals.send_catch_log_async(
            signal=signals.robots_parsed,
            robotparser=RobotParser.from_robots(entry.robots),
            request=request,
        )

    def _failed(
        self, authority: str, entry: RobotsEntry, exc: Exception | None = None
    ) -> RobotsEntry:
        self.stats.inc_value("rfc9309/unreachable")
        if entry.stale:
            self.stats.inc_value("rfc9309/stale")
        if authority not in self._warned:
            self._warned.add(authority)
            error = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
            logger.warning("%s: %s%s", authority, entry.describe(), error)
        return entry
