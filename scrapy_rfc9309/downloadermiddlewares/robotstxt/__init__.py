"""Downloader middlewares: fetch each authority's robots.txt and drop what it disallows.

Differences from Scrapy's built-in ``RobotsTxtMiddleware`` (RFC 9309 §2.3-2.4):
the cache key is the authority (scheme + host + port), entries expire, a 429/5xx
or a network error disallows (or reuses the last good copy) instead of allowing
everything, redirects are followed across hosts up to a limit, the download stops
at ``RFC9309_MAX_BYTES`` of decoded text, and every request waiting for a
robots.txt is checked against it (one fetch per authority in flight).

Two components: ``RobotsTxtMiddleware`` (where Scrapy's sits, 100) decides, and
``RobotsTxtDecompressionMiddleware`` (after ``HttpCompressionMiddleware``, 595)
decodes robots.txt bodies within the size limit before Scrapy would decode them
whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections import OrderedDict
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import Deferred

from ..._redis import redacted_url
from ..._settings import (
    ROBOTS_DEFAULTS,
    RobotsSettings,
    flag,
    fleet_url,
    number,
    report_configuration_errors_in_one_line,
    require_asyncio,
    token_mistakes,
    use_mistakes,
    with_defaults,
)
from ..._shared import (
    META_DELAY,
    META_PREFERENCES,
    META_ROBOTS,
    ROBOTS_PARSED,
    RobotsFetchPutOff,
    authority_of,
    crawler_token,
    offers,
)
from ...robotparser import RobotParser
from ...robots import (
    NO_PREFERENCES,
    FetchOutcome,
    RedisRobotsStore,
    RobotsEntry,
    SQLiteRobotsStore,
    categories_of,
    content_codings,
    decode_bounded,
    parse_preference,
)
from ._fetch import Fetcher, RobotsFetcher, has_robots_txt, route_of
from ._fleet import SharedRobotsFetcher
from ._persistent import PersistentRobotsFetcher
from ._report import RobotsReport

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["RobotsTxtDecompressionMiddleware", "RobotsTxtMiddleware"]


class RobotsTxtMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        report_configuration_errors_in_one_line()
        if not flag(crawler.settings, "ROBOTSTXT_OBEY"):
            raise NotConfigured
        require_asyncio(
            "scrapy_rfc9309.RobotsTxtMiddleware (or Scrapy's own, with "
            'ROBOTSTXT_PARSER = "scrapy_rfc9309.RobotParser", for the matching alone)'
        )
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = RobotsSettings.from_settings(with_defaults(crawler.settings, ROBOTS_DEFAULTS))
        self.fetcher: Fetcher = RobotsFetcher(crawler, self.config, self._fresh)
        self._fleet = fleet = fleet_url(crawler.settings)
        store, where = self._kept_store(fleet)
        if fleet:
            # The fleet's copy is the one it keeps across restarts, if it keeps one.
            shared_store = store if isinstance(store, RedisRobotsStore) else None
            self.fetcher = SharedRobotsFetcher(crawler, self.fetcher, fleet, shared_store)
            crawler.signals.connect(self.fetcher.close, signal=signals.spider_closed)
        kept = "not kept across restarts"
        self.persistent: PersistentRobotsFetcher | None = None
        if store is not None:
            self.persistent = self.fetcher = PersistentRobotsFetcher(
                crawler, self.fetcher, store, where
            )
            crawler.signals.connect(self.fetcher.close, signal=signals.spider_closed)
            kept = f"kept across restarts in {where}"
        self._default_user_agent: str = crawler.settings.get("USER_AGENT") or ""
        #: Whose compiled rules the cache's memory estimates count.
        self._cache_user_agent = self.config.user_agent or self._default_user_agent
        self._cache: OrderedDict[str, RobotsEntry] = OrderedDict()
        self._cache_bytes = 0  # the entries' memory estimates, summed
        self._waiters: dict[str, list[Deferred[RobotsEntry]]] = {}
        self.report = RobotsReport()
        self._offers = offers(crawler)
        self._offers.robots_refuses = self.refuses
        self._offers.robots_fetching = self._waiters.__len__
        self._offers.robots_unread = self.unread
        self._offers.robots_read_ahead = self.read_ahead
        self._offers.robots = self
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        for mistake in token_mistakes(crawler.settings) + use_mistakes(self.config.content_uses):
            logger.warning("scrapy_rfc9309: %s", mistake)
        logger.info(
            "robots.txt obeyed (RFC 9309) for product token %r; copies shared %s, %s",
            self.config.token,
            f"through the fleet Redis {redacted_url(fleet)}" if fleet else "in this process only",
            kept,
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _kept_store(
        self, fleet: str | None
    ) -> tuple[RedisRobotsStore | SQLiteRobotsStore | None, str]:
        """Where robots.txt is kept across restarts, if it is, and that place in words."""
        max_bytes = self.config.max_bytes
        if self.config.persistent_path is None:
            return None, ""
        if fleet:
            return RedisRobotsStore(fleet, max_bytes), f"the fleet Redis {redacted_url(fleet)}"
        store = SQLiteRobotsStore(self.config.persistent_path, max_bytes, time.time)
        return store, str(store.path)

    # -- requests --------------------------------------------------------

    async def process_request(self, request: Request, spider: Any = None) -> Request | None:
        if request.meta.get(META_ROBOTS) or request.url.startswith(("data:", "file:")):
            return None
        excluded_by = self.config.excluded(request.url)
        if excluded_by is not None:  # the operator's deny list always wins
            self.stats.inc_value("rfc9309/excluded")
            logger.debug("Excluded by RFC9309_EXCLUDE_PATHS %r: %s", excluded_by, request)
            raise IgnoreRequest(f"Excluded by RFC9309_EXCLUDE_PATHS entry {excluded_by!r}")
        if request.meta.get("dont_obey_robotstxt") or not has_robots_txt(request):
            return None  # robots.txt is fetched over http(s) only: ftp:, s3: ... pass
        authority = authority_of(request)
        if self._offers.budget_refusal is not None and self._must_fetch(authority):
            refused = await self._offers.budget_refusal(request)
            if refused is not None:  # no page may go: its robots.txt is not worth a request
                raise IgnoreRequest(refused)
        entry = await self._entry_unless_put_off(authority, request)
        if entry is None:
            self.stats.inc_value("rfc9309/handed_back")
            return request.replace(dont_filter=True)  # to the scheduler, for later
        token = crawler_token(self.config.user_agent, request, self._default_user_agent)
        verdict = entry.check(request.url, token)
        if not verdict.allowed:
            self.stats.inc_value("rfc9309/forbidden")
            self.report.dropped(
                authority, entry.describe(), verdict.rule, verdict.line, entry.delay(token)
            )
            # Without a line, no rule decided: the file is unreachable, as described.
            why = entry.describe()
            if verdict.line:
                why = f"{verdict.rule} (line {verdict.line}; {why})"
            logger.debug("Forbidden by robots.txt: %s: %s", why, request)
            line = f" (line {verdict.line})" if verdict.line else ""
            raise IgnoreRequest(f"Forbidden by robots.txt: {verdict.rule}{line}")
        delay = entry.delay(token)
        if delay is not None:
            request.meta[META_DELAY] = delay
        if entry.robots is not None:
            self._preferences(authority, entry, request, token)
        return None

    def _preferences(
        self, authority: str, entry: RobotsEntry, request: Request, token: str
    ) -> None:
        """Put the site's usage preferences for *request* on its meta; drop it if they
        refuse a use the crawl is for (``RFC9309_CONTENT_USES``)."""
        assert entry.robots is not None
        found = entry.robots.preferences(request.url, token)
        if not found:
            return
        request.meta[META_PREFERENCES] = found.as_meta()
        lines = [text for _, text in found.lines]
        self.report.preferences(authority, entry.describe(), lines)
        refused = found.refused(self.config.content_uses)
        if refused is None:
            return
        self.stats.inc_value("rfc9309/preference_refused")
        line, text = found.lines[0]
        self.report.dropped(authority, entry.describe(), text, line, entry.delay(token))
        logger.debug("Refused by robots.txt for %s (%s, line %s): %s", refused, text, line, request)
        raise IgnoreRequest(f"robots.txt refuses the use {refused!r}: {text} (line {line})")

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        """Apply a response's own ``Content-Usage`` header: it wins over robots.txt
        for that response; a refused use drops the response before the spider."""
        header = response.headers.get(b"Content-Usage")
        if header is None or request.meta.get(META_ROBOTS):
            return response
        values = parse_preference(header)
        if values is None:
            self.stats.inc_value("rfc9309/preference_header_ignored")
            return response
        stated: dict[str, Any] = request.meta.get(META_PREFERENCES) or NO_PREFERENCES.as_meta()
        usage = {**stated["content-usage"], **values}
        lines = [*stated["lines"], f"Content-Usage header: {header.decode('latin-1')}"]
        request.meta[META_PREFERENCES] = {**stated, "content-usage": usage, "lines": lines}
        refused = next(
            (
                use
                for use in self.config.content_uses
                if values.get(categories_of(use)[0] or "") == "n"
            ),
            None,
        )
        if refused is not None:
            self.stats.inc_value("rfc9309/preference_refused_response")
            raise IgnoreRequest(f"the response's Content-Usage header refuses {refused!r}")
        return response

    def refuses(self, request: Request) -> bool:
        """Whether *request*'s site is unreachable with everything disallowed, by an
        entry fresh in the cache: this middleware will drop it without a fetch, and
        without contacting the site."""
        if request.meta.get(META_ROBOTS) or request.meta.get("dont_obey_robotstxt"):
            return False
        if not has_robots_txt(request):
            return False
        entry = self._fresh(authority_of(request))
        return entry is not None and entry.refuses_all

    def unread(self, request: Request) -> bool:
        """Whether *request* would wait here for its site's robots.txt: it obeys one,
        and its authority's is not at hand, fresh."""
        if request.meta.get(META_ROBOTS) or request.meta.get("dont_obey_robotstxt"):
            return False
        if not has_robots_txt(request) or self.config.excluded(request.url) is not None:
            return False
        return self._fresh(authority_of(request)) is None

    def read_ahead(self, request: Request, done: Callable[[], None]) -> None:
        """Start reading *request*'s robots.txt (from the kept copy or the site), unless
        that is under way, and call *done* once it is decided, whatever the outcome, or
        put off (after the few seconds a page would wait here for it; in a later turn
        of the event loop, never within this call): the scheduler's queue keeps the
        request meanwhile, rather than have it hold a place of the downloader while it
        waits here."""
        deferred_from_coro(self._read_ahead(request, done))

    async def _read_ahead(self, request: Request, done: Callable[[], None]) -> None:
        authority = authority_of(request)
        refusal = self._offers.budget_refusal
        try:
            # A request its budget drops (the budget then remembers its domain spent,
            # and drops it when it comes here) is not worth a robots.txt request.
            spent = (
                refusal is not None
                and self._must_fetch(authority)
                and await refusal(request, count=False) is not None
            )
            if not spent:
                await self._entry_unless_put_off(authority, request)
        except Exception as exc:  # told to the requests that waited for it already
            logger.debug("Reading the robots.txt of %s ahead failed: %s", authority, exc)
        finally:
            done()

    def _fresh(self, authority: str) -> RobotsEntry | None:
        """*authority*'s entry, if the cache holds a fresh one."""
        cached = self._cache.get(authority)
        return cached if cached is not None and not cached.expired(monotonic()) else None

    def _must_fetch(self, authority: str) -> bool:
        """Whether a request to *authority* now would start a robots.txt fetch."""
        return self._fresh(authority) is None and authority not in self._waiters

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
        if cached is not None and not cached.refuses_all:
            postponed = self._postponed(authority, cached)
            if postponed is not None:
                return postponed
        self._waiters[authority] = []
        try:
            entry = await self._fetch(authority, cached, route_of(request))
        except BaseException as exc:  # cancelled too: never leave the waiters hanging
            for waiter in self._waiters.pop(authority):
                waiter.errback(exc)
            self._decided(authority, None)
            raise
        self._store(authority, entry)
        for waiter in self._waiters.pop(authority):
            waiter.callback(entry)
        self._decided(authority, entry)
        return entry

    async def _entry_unless_put_off(self, authority: str, request: Request) -> RobotsEntry | None:
        """*authority*'s entry (see :meth:`entry`), or None if its fetch is put off:
        before it starts (see :meth:`_fetch_put_off`, which waits first), or by the
        gate, while its request waited (``RobotsFetchPutOff``)."""
        if await self._fetch_put_off(authority):
            return None
        try:
            return await self.entry(authority, request)
        except RobotsFetchPutOff:
            return None

    def _fetch_delay(self, authority: str) -> float:
        """How long a robots.txt request of *authority* is put off (see
        ``Offers.robots_fetch_delay``): 0 unless it would wait long for its unit."""
        delay = self._offers.robots_fetch_delay
        return delay(authority) if delay is not None else 0.0

    async def _fetch_put_off(self, authority: str) -> bool:
        """Whether a page of *authority* goes back to the scheduler, its robots.txt
        not at hand: a fetch would start, no copy may be obeyed meanwhile (none is
        kept, or the kept one refuses everything), and the robots.txt request would
        wait long for its unit (held after a 429/503 on another authority of it, as
        ``http://`` beside ``https://``, or another host of a domain unit), or its
        last fetch was put off and would be again.  Sent,
        that request would wait in Scrapy's downloader all that time, and a stop
        with it; the page waits here as long as a page may wait in the gate, then
        goes back, as one the gate hands back."""
        if not self._must_fetch(authority):
            return False
        cached = self._cache.get(authority)
        if cached is not None and not cached.refuses_all:
            return False  # obeyed meanwhile (see _postponed)
        seconds = self._fetch_delay(authority)
        if not seconds:
            return False
        await asyncio.sleep(seconds)
        return True

    def _postponed(self, authority: str, expired: RobotsEntry) -> RobotsEntry | None:
        """*expired* made fresh for a while, if a robots.txt request of *authority*
        would now wait long for its unit (a hold after a 429/503, a long Crawl-delay):
        the site asked not to be contacted yet, and a cached copy may outlive its
        expiry while the file cannot be fetched (RFC 9309 §2.4).  Its pages then wait
        in the gate, which hands them back to the scheduler after a few seconds, so
        that a stop is as prompt for them as for any page."""
        seconds = self._fetch_delay(authority)
        if not seconds:
            return None
        entry = dataclasses.replace(expired, expires_at=monotonic() + seconds)
        self._store(authority, entry)
        self.stats.inc_value("rfc9309/expired_copy_obeyed")
        logger.debug(
            "robots.txt of %s expired, and a request for it would wait for its unit: "
            "the copy is obeyed %.3g s more",
            authority,
            seconds,
        )
        return entry

    def _decided(self, authority: str, entry: RobotsEntry | None) -> None:
        for decided in self._offers.on_robots_decided:
            decided(authority, entry)

    def _store(self, authority: str, entry: RobotsEntry) -> None:
        """Cache *entry*, then drop the least recently used entries while the cache
        holds more than ``RFC9309_CACHE_SIZE`` entries or ``RFC9309_CACHE_MAX_BYTES``
        (by their memory estimates); the newest entry always stays."""
        replaced = self._cache.pop(authority, None)
        if replaced is not None:
            self._cache_bytes -= replaced.memory_estimate(self._cache_user_agent)
        self._cache[authority] = entry
        self._cache_bytes += entry.memory_estimate(self._cache_user_agent)
        while len(self._cache) > 1 and (
            len(self._cache) > self.config.cache_size
            or self._cache_bytes > self.config.cache_max_bytes
        ):
            _, dropped = self._cache.popitem(last=False)
            self._cache_bytes -= dropped.memory_estimate(self._cache_user_agent)
            self.stats.inc_value("rfc9309/cache_evicted")

    # -- fetching --------------------------------------------------------

    async def _fetch(
        self, authority: str, previous: RobotsEntry | None, route: dict[str, Any]
    ) -> RobotsEntry:
        fetched = await self.fetcher.fetch(authority, previous, route=route)
        entry = fetched.entry
        self.stats.inc_value(f"rfc9309/{entry.outcome.value}")
        logger.debug(
            "robots.txt of %s: %s, %s, from %s",
            authority,
            entry.describe(),
            "the copy at hand" if fetched.from_copy else f"{len(fetched.body or b'')} bytes",
            fetched.url,
        )
        if entry.outcome is FetchOutcome.SUCCESS:
            await self._send_parsed(entry, fetched.request)
            also_for = fetched.also_for(authority)
            if also_for is not None:
                # That authority's file too: its floor known before its own fetch
                # and, unless that is under way or its copy at hand, cached, so the
                # pages redirected there fetch it no second time.
                await self._send_parsed(entry, Request(fetched.url))
                if self._must_fetch(also_for):
                    self._store(also_for, entry)
        elif entry.outcome is FetchOutcome.UNREACHABLE:
            self._failed(authority, entry, fetched.error, previous)
        elif entry.reason is not None:  # a failed redirect: everything allowed, and why
            self.report.failed(authority, entry.describe())
        return entry

    async def _send_parsed(self, entry: RobotsEntry, request: Request) -> None:
        """Scrapy's ``robots_parsed`` signal, with the request to the authority the
        file applies to (the first hop when it was redirected)."""
        await self.crawler.signals.send_catch_log_async(
            signal=ROBOTS_PARSED,
            robotparser=RobotParser.from_robots(entry.robots),
            request=request,
        )

    def _spider_closed(self, spider: Any = None) -> None:
        self.stats.set_value("rfc9309/cache_entries", len(self._cache))
        self.stats.set_value("rfc9309/cache_bytes", self._cache_bytes)
        if self.persistent is not None:
            logger.info("robots.txt: %s", self._kept_summary())
        lines = self.report.lines()
        if lines:
            logger.info("robots.txt report:\n  %s", "\n  ".join(lines))
            summary = self.report.summary()
            try:
                self.stats.set_value("rfc9309/report", summary)
            except Exception:  # a collector that keeps scalars only (scrapy-redis's)
                self.stats.set_value("rfc9309/report", json.dumps(summary))

    def _kept_summary(self) -> str:
        """What the kept copies saved, in the counts that are not zero, and the
        robots.txt requests sent."""
        stat = self.stats.get_value
        again = (
            "fetched in this run by another process of the fleet (or read again)"
            if self._fleet
            else "read again after the cache let them go"
        )
        counts = [
            f"{count} {what}"
            for count, what in (
                (stat("rfc9309/persistent_hit", 0), "kept from an earlier crawl"),
                (stat("rfc9309/this_run_hit", 0), again),
                (stat("rfc9309/not_modified", 0), "refreshed unchanged (304)"),
            )
            if count
        ]
        sent = stat("rfc9309/request_count", 0)
        return ", ".join([*counts, f"{sent} request{'' if sent == 1 else 's'} sent"])

    def _failed(
        self,
        authority: str,
        entry: RobotsEntry,
        exc: BaseException | None,
        previous: RobotsEntry | None,
    ) -> None:
        """*authority*'s robots.txt could not be fetched: a WARNING unless its last
        fetch (*previous*, the cache's entry) had failed too, so that a site that
        stays unreachable is told once, whatever its refetches, with nothing kept
        for it outside the cache."""
        self.report.failed(authority, entry.describe())
        if entry.stale:
            self.stats.inc_value("rfc9309/stale")
        if previous is None or previous.outcome is not FetchOutcome.UNREACHABLE:
            error = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
            logger.warning("%s: %s%s", authority, entry.describe(), error)


class RobotsTxtDecompressionMiddleware:
    """Decodes the ``Content-Encoding`` of the package's own robots.txt responses
    into at most ``RFC9309_MAX_BYTES`` (+1, so that the parser sees the cut) of text.

    It must see responses before ``HttpCompressionMiddleware`` does (a higher
    order than its 590): Scrapy would decode the whole body, and a 1 KB brotli
    body can hold 1 GiB.  Other responses pass untouched.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = with_defaults(crawler.settings, ROBOTS_DEFAULTS)
        return cls(int(number(settings, "RFC9309_MAX_BYTES", 1)))

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        if not request.meta.get(META_ROBOTS):
            return response
        codings = content_codings(response.headers.getlist(b"Content-Encoding"))
        if not codings:
            return response
        body, undone = decode_bounded(response.body, codings, self.max_bytes + 1)
        headers = response.headers.copy()
        del headers[b"Content-Encoding"]
        if undone:
            headers[b"Content-Encoding"] = ", ".join(undone)
        return response.replace(body=body, headers=headers)
