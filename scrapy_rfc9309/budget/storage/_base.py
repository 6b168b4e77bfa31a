"""The interface every budget storage implements, and what they share."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from datetime import date, timedelta
from enum import Enum
from typing import Any


class StorageError(Exception):
    """The storage failed (I/O, lock timeout, network); wraps the backend's error."""


class Reservation(str, Enum):
    GRANTED = "granted"
    REQUESTS_EXHAUSTED = "max_requests_per_day"
    PAGES_EXHAUSTED = "max_pages_per_day"


Usage = dict[str, tuple[int, int]]  # domain key -> (requests, pages)

#: How many days of counters are kept (a day's and the days before it): Redis keys
#: expire after them; the other storages delete older days when a crawl opens.
KEEP_DAYS = 3


def first_kept_day(today: str) -> str:
    """The first of the :data:`KEEP_DAYS` days that end with *today* (``YYYY-MM-DD``)."""
    return (date.fromisoformat(today) - timedelta(days=KEEP_DAYS - 1)).isoformat()


class BudgetStorage(ABC):
    @classmethod
    def from_settings(cls, settings: Any) -> BudgetStorage:
        """Build from settings (anything with ``get(name)``); backends with options override."""
        return cls()

    @abstractmethod
    def reserve(self, key: str, day: str, max_requests: int, max_pages: int) -> Reservation:
        """Atomically: if ``requests < max_requests`` and ``pages < max_pages``
        (a limit of 0 is unlimited), add one to both and grant; otherwise change nothing."""

    @abstractmethod
    def count_request(self, key: str, day: str) -> None:
        """Add one request, never refused (robots.txt fetches)."""

    @abstractmethod
    def release_page(self, key: str, day: str) -> None:
        """Give back one page reservation (the response was not a page)."""

    def counts(self, key: str, day: str) -> tuple[int, int]:
        """*key*'s (requests, pages) on *day*, changing nothing; backends override it
        with a read of that one key."""
        return self.usage(day).get(key, (0, 0))

    @abstractmethod
    def usage(self, day: str) -> Usage:
        """Every domain key's counters for *day*."""

    @abstractmethod
    def reset(self, key: str, day: str) -> None:
        """Forget *key*'s counters for *day*."""

    def forget_before(self, day: str) -> None:  # noqa: B027 (optional for backends)
        """Delete the counters of the days before *day* (``YYYY-MM-DD``); a backend
        whose records expire by themselves keeps this no-op."""

    def close(self) -> None:  # noqa: B027 (optional for backends)
        """Release connections."""

    # -- the hot path, for an event loop (override to avoid the thread hop) --

    async def reserve_async(
        self, key: str, day: str, max_requests: int, max_pages: int
    ) -> Reservation:
        return await asyncio.to_thread(self.reserve, key, day, max_requests, max_pages)

    async def count_request_async(self, key: str, day: str) -> None:
        await asyncio.to_thread(self.count_request, key, day)

    async def release_page_async(self, key: str, day: str) -> None:
        await asyncio.to_thread(self.release_page, key, day)

    async def counts_async(self, key: str, day: str) -> tuple[int, int]:
        return await asyncio.to_thread(self.counts, key, day)

    async def forget_before_async(self, day: str) -> None:
        await asyncio.to_thread(self.forget_before, day)

    async def close_async(self) -> None:
        await asyncio.to_thread(self.close)


def reservation_for(requests: int, pages: int, max_requests: int, max_pages: int) -> Reservation:
    """Whether one more request (and page) fits under the limits, given the counts."""
    if max_requests and requests >= max_requests:
        return Reservation.REQUESTS_EXHAUSTED
    if max_pages and pages >= max_pages:
        return Reservation.PAGES_EXHAUSTED
    return Reservation.GRANTED
