"""The robots.txt pieces the components share: the authority of a request (the cache
key), the crawler's product token, the Request.meta keys, and the one fetch path of
``RobotsTxtMiddleware`` and ``scrapy robots``: fetching one authority's robots.txt
through Scrapy's downloader.

Every downloader middleware applies to the robots.txt request (User-Agent, proxy,
budget counting), which also takes the proxy the request that asked for it names
(:data:`ROUTE_META`); the guards against hostile sites are here and in
:class:`~scrapy_rfc9309.robots._fetchplan.FetchPlan`:

* redirects are followed by hand, only to ``http``/``https`` URLs, at most
  ``RFC9309_MAX_REDIRECTS`` hops;
* one deadline, ``RFC9309_TIMEOUT``, bounds the whole fetch (each hop gets what is left);
* the download stops after ``RFC9309_MAX_BYTES`` received, and
  ``RobotsTxtDecompressionMiddleware`` decodes at most that much text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from time import monotonic, time
from typing import TYPE_CHECKING, Any, Protocol, cast

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http.request import NO_CALLBACK
from scrapy.settings import default_settings
from scrapy.utils.asyncio import run_in_thread
from scrapy.utils.conf import build_component_list
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import load_object
from w3lib.url import safe_url_string

from ..._settings import SettingError
from ..._shared import META_ROBOTS, RobotsFetchPutOff, authority_of
from ...backoff import parse_retry_after
from ...robots import (
    FETCHABLE_SCHEMES,
    FetchOutcome,
    FetchPlan,
    RobotsEntry,
    RobotsTxt,
    is_redirect,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

    from ..._settings import RobotsSettings

logger = logging.getLogger(__name__)

_META_RECEIVED = "_rfc9309_received"

#: What a failed download raises (a site that is down, slow or refusing): the
#: exceptions Scrapy retries by default, and a request a middleware dropped.
#: Anything else is a bug, logged as one.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    IgnoreRequest,
    *(load_object(path) for path in cast("list[Any]", default_settings.RETRY_EXCEPTIONS)),
    *(
        load_object(path)
        for path in (
            "twisted.internet.defer.CancelledError",
            "twisted.internet.error.TimeoutError",
            "twisted.web.client.ResponseFailed",
            "twisted.web.client.ResponseNeverReceived",
        )
    ),
)


def has_robots_txt(request: Request) -> bool:
    """True for the URLs a robots.txt is fetched for: ``http`` and ``https`` only."""
    return urlparse_cached(request).scheme in FETCHABLE_SCHEMES


@dataclass(frozen=True)
class Fetched:
    """The result of one fetch: the entry to cache, the URL last requested, the first
    request (to the authority itself, for Scrapy's ``robots_parsed`` signal), the
    error that made it unreachable, the body a 2xx entry was parsed from, and the
    validators a later conditional request can send.  ``not_modified``: the site
    answered 304 to a conditional request; the entry is the stored copy.  ``kept``:
    the result is already in the store kept across restarts (the fleet's one copy)."""

    entry: RobotsEntry
    url: str
    request: Request
    error: BaseException | None = None
    body: bytes | None = None
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False
    kept: bool = False
    #: The requests the fetch sent, in order, each with its answer's status (``None``:
    #: none came): more than one when robots.txt was redirected.
    hops: tuple[tuple[str, int | None], ...] = ()
    #: The entry is the copy at hand of another authority's own robots.txt, which a
    #: redirect led to (no request sent for it): it has no body, and is neither
    #: kept across restarts nor shared with a fleet for this authority.
    from_copy: bool = False

    def also_for(self, authority: str) -> str | None:
        """The other authority whose own robots.txt *authority*'s fetch ended at, with
        a file (redirected: ``www.`` -> apex, ``http://`` -> ``https://``): the file
        is that authority's too.  ``None`` for any other fetch, and for a copy at
        hand (that authority's file already)."""
        if self.entry.outcome is not FetchOutcome.SUCCESS or self.from_copy:
            return None
        return own_robots_of(self.url, authority)


def own_robots_of(url: str, authority: str) -> str | None:
    """The authority *url* is the own robots.txt of (``/robots.txt``, no query), if
    it is not *authority*."""
    found_at = Request(url)
    parsed = urlparse_cached(found_at)
    if parsed.path != "/robots.txt" or parsed.query:
        return None
    found_for = authority_of(found_at)
    return found_for if found_for != authority else None


@dataclass(frozen=True)
class Revalidation:
    """A stored copy of a robots.txt, to refresh with a conditional request."""

    robots: RobotsTxt
    body: bytes
    etag: str | None
    last_modified: str | None


#: The Request.meta keys a robots.txt fetch takes from the request that asked for it:
#: how that request reaches the site (a proxy the spider set, or none; the address
#: it binds), so that the file is fetched the same way.
ROUTE_META = ("proxy", "bindaddress")


def route_of(request: Request) -> dict[str, Any]:
    """The :data:`ROUTE_META` keys of *request*'s meta."""
    return {key: request.meta[key] for key in ROUTE_META if key in request.meta}


#: A fetch put off at a redirect's next hop goes on from that hop if the
#: authority's next fetch starts within this many seconds of the end of its wait;
#: later, it starts again from its first request (the redirect may have changed).
PAUSE_KEPT = 60.0


@dataclass(frozen=True)
class Paused:
    """A fetch whose next request the gate put off: where the authority's next fetch
    goes on from, if it starts by *until* (:func:`time.monotonic`)."""

    plan: FetchPlan
    first: Request
    hops: list[tuple[str, int | None]]
    until: float


class Fetcher(Protocol):
    """What fetches robots.txt for the middleware: :class:`RobotsFetcher`, or a wrapper
    around one (the fleet's shared copy, the copy kept across restarts)."""

    config: RobotsSettings

    async def fetch(
        self,
        authority: str,
        previous: RobotsEntry | None = None,
        revalidate: Revalidation | None = None,
        route: dict[str, Any] | None = None,
    ) -> Fetched: ...


class RobotsFetcher:
    """Fetches robots.txt files for one crawler with the settings in *config*."""

    DOWNLOAD_PRIORITY = 1000

    def __init__(
        self,
        crawler: Crawler,
        config: RobotsSettings,
        at_hand: Callable[[str], RobotsEntry | None] | None = None,
    ) -> None:
        check_decompression_order(crawler.settings)
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        #: An authority's file, if a fresh copy of it is at hand (the middleware's
        #: cache): a redirect to that authority's own robots.txt ends there.
        self.at_hand = at_hand
        #: Fetches put off at a redirect's next hop, by authority.
        self._paused: dict[str, Paused] = {}
        crawler.signals.connect(self._bytes_received, signal=signals.bytes_received)

    async def fetch(
        self,
        authority: str,
        previous: RobotsEntry | None = None,
        revalidate: Revalidation | None = None,
        route: dict[str, Any] | None = None,
    ) -> Fetched:
        """Fetch ``{authority}/robots.txt``; *previous* is the last cached entry (its
        file is reused while the site is unreachable, RFC 9309 §2.4); with
        *revalidate*, the request is conditional, and a 304 answer renews that copy;
        *route*: the :data:`ROUTE_META` keys of the request that asked for it.

        Raises :class:`RobotsFetchPutOff` if the gate puts a request off; put off at
        a redirect's next hop, the authority's next fetch goes on from that hop
        (its time starting again), if it starts within :data:`PAUSE_KEPT` of the
        end of the wait: started from its first request, it would meet the same
        wait at the same hop."""
        config = self.config
        paused = self._paused.pop(authority, None)
        first: Request | None = None
        if paused is not None and monotonic() <= paused.until:
            plan, first, hops = paused.plan, paused.first, paused.hops
            plan.go_on(monotonic())
        else:
            plan = FetchPlan(
                authority,
                config.policy,
                max_redirects=config.max_redirects,
                timeout=config.timeout,
                now=monotonic(),
                previous=previous,
            )
            hops = []
        while True:
            time_left = plan.time_left(monotonic())
            request = self._robots_request(
                authority, plan.url, time_left, None if first else revalidate, route
            )
            first = first or request
            if time_left <= 0:  # the redirects so far took all of RFC9309_TIMEOUT
                self.stats.inc_value("rfc9309/exception_count/TimeoutError")
                error = TimeoutError(f"no robots.txt within RFC9309_TIMEOUT ({config.timeout:g} s)")
                return Fetched(
                    plan.unreachable(monotonic()), plan.url, first, error, hops=tuple(hops)
                )
            self.stats.inc_value("rfc9309/request_count")
            hops.append((request.url, None))
            try:
                response = await self.crawler.engine.download_async(request)
            except RobotsFetchPutOff as exc:  # not the site's answer: the fetch ends undecided
                self.stats.inc_value("rfc9309/request_count", -1)  # not sent
                hops.pop()
                if request is not first:
                    until = monotonic() + exc.wait + PAUSE_KEPT
                    self._paused[authority] = Paused(plan, first, hops, until)
                raise
            except NETWORK_ERRORS as exc:
                self.stats.inc_value(f"rfc9309/exception_count/{type(exc).__name__}")
                return Fetched(
                    plan.unreachable(monotonic()), plan.url, first, exc, hops=tuple(hops)
                )
            except Exception as exc:  # a bug, not a site that is down
                logger.error(
                    "Error fetching %s; treating it as unreachable", request, exc_info=True
                )
                self.stats.inc_value(f"rfc9309/exception_count/{type(exc).__name__}")
                return Fetched(
                    plan.unreachable(monotonic()), plan.url, first, exc, hops=tuple(hops)
                )
            status = response.status
            hops[-1] = (request.url, status)
            self.stats.inc_value(f"rfc9309/response_status_count/{status}")
            if status == 304 and revalidate is not None and request is first:
                entry = config.policy.success(revalidate.robots, monotonic(), status)
                return Fetched(
                    entry,
                    plan.url,
                    first,
                    hops=tuple(hops),
                    body=revalidate.body,
                    etag=_header(response, b"ETag", revalidate.etag),
                    last_modified=_header(response, b"Last-Modified", revalidate.last_modified),
                    not_modified=True,
                )
            if is_redirect(status):
                location = response.headers.get(b"Location")
                ended = plan.redirect(_clean_location(location, response), monotonic())
                if ended is None:
                    copy = self._copy_at_hand(authority, plan.url)
                    if copy is None:
                        continue
                    return Fetched(copy, plan.url, first, hops=tuple(hops), from_copy=True)
                self.stats.inc_value(f"rfc9309/{plan.failed_redirect}")
                return Fetched(ended, plan.url, first, hops=tuple(hops))
            if 200 <= status < 300:
                body = response.body
                entry = plan.response(status, await self._parse(response), monotonic())
                return Fetched(
                    entry,
                    plan.url,
                    first,
                    hops=tuple(hops),
                    body=body,
                    etag=_header(response, b"ETag"),
                    last_modified=_header(response, b"Last-Modified"),
                )
            entry = self._retry_after(plan.response(status, None, monotonic()), response)
            return Fetched(entry, plan.url, first, hops=tuple(hops))

    def _copy_at_hand(self, authority: str, url: str) -> RobotsEntry | None:
        """The fresh copy at hand of the file *url* names, when *authority*'s fetch
        was redirected to another authority's own robots.txt (``http://`` ->
        ``https://``)."""
        if self.at_hand is None:
            return None
        other = own_robots_of(url, authority)
        copy = self.at_hand(other) if other is not None else None
        return copy if copy is not None and copy.outcome is FetchOutcome.SUCCESS else None

    def _retry_after(self, entry: RobotsEntry, response: Response) -> RobotsEntry:
        """With backing off on, a robots.txt answered "slow down" with a usable
        ``Retry-After`` is fetched again after it (capped), not after
        ``RFC9309_FAILURE_TTL``."""
        backoff = self.config.backoff
        if backoff is None or response.status not in backoff.codes:
            return entry
        retry_after = parse_retry_after(response.headers.get(b"Retry-After"), time())
        if retry_after is None or retry_after.seconds is None:
            return entry
        wait = min(retry_after.seconds, backoff.max_retry_after)
        return replace(entry, expires_at=entry.fetched_at + wait)

    def _robots_request(
        self,
        authority: str,
        url: str,
        timeout: float,
        revalidate: Revalidation | None = None,
        route: dict[str, Any] | None = None,
    ) -> Request:
        """A request of ``authority``'s robots.txt fetch: *url*, the file or a hop of
        a redirect."""
        headers = {}
        if revalidate is not None:
            if revalidate.etag:
                headers["If-None-Match"] = revalidate.etag
            if revalidate.last_modified:
                headers["If-Modified-Since"] = revalidate.last_modified
        return Request(
            url,
            headers=headers,
            priority=self.DOWNLOAD_PRIORITY,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                **(route or {}),
                META_ROBOTS: authority,
                "dont_obey_robotstxt": True,
                "allow_offsite": True,  # allowed_domains must not turn robots.txt off
                "dont_redirect": True,  # followed here: hops counted, schemes checked
                "dont_retry": True,  # a failure is retried after RFC9309_FAILURE_TTL
                # Kept by this package's TTL (RFC 9309 §2.4), never by Scrapy's HTTP
                # cache, whose default policy would answer for the site forever.
                "dont_cache": True,
                "handle_httpstatus_all": True,
                "download_timeout": max(timeout, 0.001),
                # Cut in _bytes_received and decoded by RobotsTxtDecompressionMiddleware
                # instead: Scrapy's own size limit fails the download, and a
                # robots.txt over the limit is parsed up to it (RFC 9309 §2.5).
                "download_maxsize": 0,
                "download_warnsize": 0,
            },
        )

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        if not request.meta.get(META_ROBOTS):
            return
        received = request.meta.get(_META_RECEIVED, 0) + len(data)
        request.meta[_META_RECEIVED] = received
        if received > self.config.max_bytes:
            raise StopDownload(fail=False)  # keep what arrived, parse its head

    async def _parse(self, response: Response) -> RobotsTxt:
        robots = await parse_body(self.config, response.body)
        if robots.truncated or "download_stopped" in response.flags:
            self.stats.inc_value("rfc9309/truncated")
            logger.info(
                "robots.txt at %s is longer than RFC9309_MAX_BYTES (%d): the rest is ignored",
                response.url,
                self.config.max_bytes,
            )
        return robots


def entry_for(
    config: RobotsSettings,
    outcome: FetchOutcome,
    status: int | None,
    robots: RobotsTxt | None,
    reason: str | None,
    fresh_for: float,
    previous: RobotsEntry | None = None,
    kept_since: float | None = None,
) -> RobotsEntry:
    """The cache entry for a result fetched earlier (by another process, or before a
    restart, at *kept_since* seconds since the epoch), fresh for *fresh_for* more
    seconds (never longer than the policy's)."""
    now = monotonic()
    policy = config.policy
    if outcome is FetchOutcome.SUCCESS and robots is not None:
        entry = policy.success(robots, now, status)
    elif outcome is FetchOutcome.UNAVAILABLE:
        entry = policy.unavailable(now, status, reason)
    else:  # unreachable: this process's own last good copy, if it has one
        entry = policy.unreachable(now, previous, status)
    expires_at = min(entry.expires_at, now + max(fresh_for, 0.0))
    return replace(entry, expires_at=expires_at, kept_since=kept_since)


#: A robots.txt body at least this long is parsed, and the crawler's rules in it
#: compiled, on a worker thread.  A hostile 500 KiB file of distinct wildcard rules
#: costs up to a few hundred ms of CPU; on a thread, the reactor keeps running between
#: the interpreter's thread switches (every 5 ms), and every other site's requests with
#: it.  A shorter body costs the reactor at most ~6 ms at a time (867 distinct wildcard
#: rules: their compiling check, measured); 14 of the 296 real files are this long.
PARSE_IN_THREAD_AT = 16 * 1024


def parse_now(config: RobotsSettings, body: bytes) -> RobotsTxt:
    """Parse *body* with the settings in *config*, here and now."""
    return RobotsTxt.parse(body, lenient=config.lenient, max_bytes=config.max_bytes)


async def parse_body(config: RobotsSettings, body: bytes) -> RobotsTxt:
    """Parse *body*: a long one on a worker thread, with the rules of the crawler's
    product token compiled there too, so that no check on the reactor compiles them."""
    if len(body) < PARSE_IN_THREAD_AT:
        return parse_now(config, body)
    return await run_in_thread(_parse_and_prepare, config, body)


def _parse_and_prepare(config: RobotsSettings, body: bytes) -> RobotsTxt:
    robots = parse_now(config, body)
    robots.prepare(config.token)
    return robots


def _header(response: Response, name: bytes, stored: str | None = None) -> str | None:
    """The header *name* of *response* as text, else *stored*."""
    value = response.headers.get(name)
    return (value.decode("latin-1").strip() if value else None) or stored


def _clean_location(location: bytes | None, response: Response) -> str | None:
    """An absolute, safely encoded redirect target (as Scrapy's RedirectMiddleware
    makes it), or ``None`` without a Location header."""
    if not location:
        return None
    if location.startswith(b"//"):  # scheme-relative
        location = urlparse_cached(response).scheme.encode() + b":" + location
    return safe_url_string(location.decode("latin-1"))


_DECOMPRESSION = "scrapy_rfc9309.downloadermiddlewares.robotstxt.RobotsTxtDecompressionMiddleware"
_HTTP_COMPRESSION = "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"


def check_decompression_order(settings: BaseSettings) -> None:
    """Raise :class:`SettingError` unless ``RobotsTxtDecompressionMiddleware`` is
    enabled and sees responses before ``HttpCompressionMiddleware`` (a higher order)."""
    enabled = [
        load_object(c) if isinstance(c, str) else c
        for c in build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    ]
    ours, theirs = load_object(_DECOMPRESSION), load_object(_HTTP_COMPRESSION)
    if ours not in enabled:
        raise SettingError(
            "DOWNLOADER_MIDDLEWARES: scrapy_rfc9309.RobotsTxtDecompressionMiddleware must be "
            "enabled with RobotsTxtMiddleware (e.g. at 595, after HttpCompressionMiddleware) "
            "so that a compressed robots.txt is never decoded whole; the add-on does this"
        )
    if theirs in enabled and enabled.index(ours) < enabled.index(theirs):
        raise SettingError(
            "DOWNLOADER_MIDDLEWARES: scrapy_rfc9309.RobotsTxtDecompressionMiddleware needs a "
            "higher order than HttpCompressionMiddleware (e.g. 595) so that robots.txt "
            "bodies are decoded within RFC9309_MAX_BYTES first"
        )
