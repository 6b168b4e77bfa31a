"""Downloader middleware: per-domain daily request and page budgets.

A request reserves one request and one page of its domain's budget before it is
sent (atomically, in the storage), so concurrent requests never overshoot a limit;
the page is given back when the response is not a 2xx.  Place it after Scrapy's
HTTP cache (the add-on uses 950) so that cache hits cost nothing; retries and
redirect hops pass through it again and are counted.  Storage calls never block
the event loop (see :mod:`scrapy_rfc9309.budget.storage`): a slow disk, a locked
file or a slow Redis never freezes the crawl.  It needs Scrapy's asyncio reactor
(the default).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from ..._settings import (
    flag,
    report_configuration_errors_in_one_line,
    require_asyncio,
)
from ..._shared import META_ROBOTS, offers
from ...budget.policy import DomainLimits, day_of
from ...budget.storage import Reservation, StorageError, first_kept_day, reservation_for
from ._setup import BudgetSettings, unix_time

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

#: How many domains the close summary names (those that used most pages); the others
#: are summed in one line.
TOP_DOMAINS = 10
#: How many domains this process remembers having counted, for that summary.
MAX_COUNTED = 10_000

#: Request.meta key holding (domain key, day) of a granted reservation.
META_RESERVED = "domainbudget_reserved"


class DomainBudgetMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        report_configuration_errors_in_one_line()
        if not flag(crawler.settings, "DOMAINBUDGET_ENABLED"):
            raise NotConfigured
        require_asyncio("DOMAINBUDGET_ENABLED")
        config = BudgetSettings.from_settings(crawler.settings)
        self.crawler = crawler
        self.stats = crawler.stats
        self.policy = config.policy
        self.tz = config.tz
        self.fail_closed = config.fail_closed
        self.storage = config.build_storage()
        logger.info("Domain budgets: %s", config.describe())
        self._announced: set[tuple[str, str]] = set()
        self._spent: set[tuple[str, str]] = set()  # (domain, day) found spent
        self._storage_failed = False
        self._touched: dict[str, DomainLimits] = {}
        self._forgetting: asyncio.Future[None] | None = None  # older days being deleted
        self._store = config.describe_store()
        self._offers = offers(crawler)
        self._offers.budget_refusal = self.refusal
        self._offers.budget_spent = self.spent
        self._offers.budgets_spent = self.spent_today
        crawler.signals.connect(self._check_storage, signal=signals.spider_opened)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def _check_storage(self, spider: Any = None) -> None:
        """Read the store once before the first request: one that cannot be reached
        (a Redis with nothing listening) is said at start-up, in one line, with what
        ``DOMAINBUDGET_ON_STORAGE_ERROR`` makes of it.  Then have it delete, while the
        crawl goes on, the days before :func:`first_kept_day` (an SQLite file would
        grow by every domain of every day)."""
        today = day_of(unix_time(), self.tz)
        try:
            await self.storage.counts_async("", today)
        except StorageError as exc:
            self._storage_failed = True
            self.stats.inc_value("domainbudget/storage_error")
            logger.error(
                "Budget storage %s cannot be reached at start-up (%s); %s until it answers "
                "(DOMAINBUDGET_ON_STORAGE_ERROR = %r)",
                self._store,
                exc,
                "requests are dropped (robots.txt excepted)"
                if self.fail_closed
                else "requests go through uncounted",
                "deny" if self.fail_closed else "allow",
            )
            return
        self._forgetting = asyncio.ensure_future(self._forget_before(first_kept_day(today)))

    async def _forget_before(self, day: str) -> None:
        """Have the storage delete the days before *day*, while the crawl goes on.  A
        failure, whatever it is (a storage of the user's own too), is one WARNING: the
        counts are untouched, and the next crawl's start tries again."""
        try:
            await self.storage.forget_before_async(day)
        except Exception as exc:
            logger.warning("Budget storage %s kept the days before %s (%s)", self._store, day, exc)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        host = urlparse_cached(request).hostname
        if not host:
            return
        limits = self.policy.limits_for(host)
        day = day_of(unix_time(), self.tz)
        if len(self._touched) < MAX_COUNTED:
            self._touched[limits.key] = limits
        if request.meta.get(META_ROBOTS):  # robots.txt: counted, never refused
            try:
                await self.storage.count_request_async(limits.key, day)
                self.stats.inc_value("domainbudget/robots_counted")
            except StorageError as exc:  # not even when the storage fails
                self._on_storage_error(exc, deny=False)
            return
        try:
            result = await self.storage.reserve_async(
                limits.key,
                day,
                limits.max_requests_per_day,
                limits.max_pages_per_day,
            )
        except StorageError as exc:
            self._on_storage_error(exc)
            return
        if result is Reservation.GRANTED:
            request.meta[META_RESERVED] = (limits.key, day)
            self.stats.inc_value("domainbudget/granted")
            self._spent.discard((limits.key, day))
            return
        raise IgnoreRequest(self._refused(limits, day, result))

    def spent_today(self) -> int:
        """How many domains were found spent today."""
        day = day_of(unix_time(), self.tz)
        return sum(1 for _, spent_on in self._spent if spent_on == day)

    def spent(self, request: Request) -> bool:
        """Whether *request*'s domain was found spent today (a memory, not a read)."""
        host = urlparse_cached(request).hostname
        if not host or not self._spent or request.meta.get(META_ROBOTS):
            return False
        return (self.policy.limits_for(host).key, day_of(unix_time(), self.tz)) in self._spent

    async def refusal(self, request: Request, count: bool = True) -> str | None:
        """Why *request* would be dropped now (its domain's budget for today is spent),
        counted as a drop unless *count* is false (the caller does not drop it yet);
        ``None`` if it would not be.  Reserves nothing: a read."""
        host = urlparse_cached(request).hostname
        if not host or request.meta.get(META_ROBOTS):
            return None
        limits = self.policy.limits_for(host)
        day = day_of(unix_time(), self.tz)
        try:
            requests, pages = await self.storage.counts_async(limits.key, day)
        except StorageError:
            return None  # the reservation follows DOMAINBUDGET_ON_STORAGE_ERROR
        result = reservation_for(
            requests, pages, limits.max_requests_per_day, limits.max_pages_per_day
        )
        if result is Reservation.GRANTED:
            self._spent.discard((limits.key, day))
            return None
        self._touched[limits.key] = limits
        return self._refused(limits, day, result, count)

    def _refused(
        self, limits: DomainLimits, day: str, result: Reservation, count: bool = True
    ) -> str:
        """Count a request dropped for *result* (if *count*), say once per domain and
        day which limit was reached, and give the reason."""
        if count:
            self.stats.inc_value("domainbudget/dropped")
            self.stats.inc_value(f"domainbudget/dropped/{result.value}")
        if (limits.key, day) not in self._spent:
            self._spent.add((limits.key, day))
            for spent in self._offers.on_budget_spent:
                spent()
        if (limits.key, day) not in self._announced:
            self._announced.add((limits.key, day))
            limit = (
                limits.max_requests_per_day
                if result is Reservation.REQUESTS_EXHAUSTED
                else limits.max_pages_per_day
            )
            logger.info(
                "Daily budget of %s reached (%s = %s on %s): dropping its requests",
                limits.key,
                result.value,
                limit,
                day,
            )
        return f"Daily budget of {limits.key} reached ({result.value})"

    async def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        if not 200 <= response.status < 300:
            await self._release(request)
        return response

    async def process_exception(
        self, request: Request, exception: Exception, spider: Any = None
    ) -> None:
        await self._release(request)

    async def _release(self, request: Request) -> None:
        """The reserved page was not a page: give it back."""
        reserved = request.meta.pop(META_RESERVED, None)
        if reserved is None:
            return
        self._spent.discard(reserved)
        try:
            await self.storage.release_page_async(*reserved)
            self.stats.inc_value("domainbudget/pages_released")
        except StorageError as exc:
            self._on_storage_error(exc, deny=False)

    def _on_storage_error(self, exc: StorageError, deny: bool | None = None) -> None:
        self.stats.inc_value("domainbudget/storage_error")
        deny = self.fail_closed if deny is None else deny
        if not self._storage_failed:
            self._storage_failed = True
            logger.error(
                "Budget storage failed (%s); %s (DOMAINBUDGET_ON_STORAGE_ERROR)",
                exc,
                "dropping requests (robots.txt excepted)"
                if self.fail_closed
                else "letting requests through",
            )
        if deny:
            raise IgnoreRequest(f"Budget storage failed: {exc}")

    async def _spider_closed(self, spider: Any = None) -> None:
        day = day_of(unix_time(), self.tz)
        try:
            usage: dict[str, tuple[int, int]] | None = await asyncio.to_thread(
                self.storage.usage, day
            )
        except StorageError as exc:
            logger.error("Budget storage failed at close: %s", exc)
            usage = None
        if self._storage_failed:  # what the store holds misses what went through meanwhile
            usage = None
        for line in self._summary(day, usage):
            logger.info("%s", line)
        if self._forgetting is not None:  # its thread uses a connection close() ends
            await self._forgetting
        await self.storage.close_async()

    def _summary(self, day: str, usage: dict[str, tuple[int, int]] | None) -> list[str]:
        """The day's use of the domains this process counted (*usage*: the store's,
        ``None`` if unknown): a line for each of the TOP_DOMAINS that used most
        pages, one for the others."""
        used = usage or {}
        ranked = sorted(
            self._touched.items(), key=lambda item: (-used.get(item[0], (0, 0))[1], item[0])
        )
        lines = []
        for key, limits in ranked[:TOP_DOMAINS]:
            if usage is None:
                lines.append(
                    f"Daily budget of {key} on {day}: use unknown (the budget storage failed)"
                )
                continue
            requests, pages = used.get(key, (0, 0))
            lines.append(
                f"Daily budget of {key} on {day}: "
                f"{requests}/{limits.max_requests_per_day or 'unlimited'} requests, "
                f"{pages}/{limits.max_pages_per_day or 'unlimited'} pages"
            )
        rest = [used.get(key, (0, 0)) for key, _ in ranked[TOP_DOMAINS:]]
        if rest:
            more = f"{len(rest)}+" if len(self._touched) >= MAX_COUNTED else str(len(rest))
            what = (
                "use unknown"
                if usage is None
                else f"{sum(r for r, _ in rest)} requests, {sum(p for _, p in rest)} pages"
            )
            lines.append(f"Daily budgets on {day}: {more} more domains, {what}")
        return lines
