"""When each download slot may next start a request, as the Crawl-delay throttle
knows it, for the scheduler's queue (:mod:`scrapy_rfc9309.pqueues`): the two share one
:class:`HostClock` per crawler and never import each other."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def _no_floor(key: str) -> float:
    return 0.0


def _never_seen(key: str) -> float | None:
    return None


def _never_held(key: str) -> float:
    return 0.0


class HostClock:
    """A slot key's floor, when it was last seen (a request's start or end) and until
    when it is held (a host backing off), on the clock *now*; without the throttle,
    no key has a floor nor a hold."""

    def __init__(self) -> None:
        self.floor: Callable[[str], float] = _no_floor
        self.last_seen: Callable[[str], float | None] = _never_seen
        self.held_until: Callable[[str], float] = _never_held
        self.now: Callable[[], float] = time.monotonic

    def ready_at(self, key: str) -> float:
        """The earliest time slot *key* may start its next request (0: any time)."""
        floor = self.floor(key)
        seen = self.last_seen(key) if floor else None
        return max(seen + floor if seen is not None else 0.0, self.held_until(key))


_CLOCKS: weakref.WeakKeyDictionary[Crawler, HostClock] = weakref.WeakKeyDictionary()


def host_clock(crawler: Crawler) -> HostClock:
    """The one :class:`HostClock` of *crawler*."""
    clock = _CLOCKS.get(crawler)
    if clock is None:
        clock = _CLOCKS[crawler] = HostClock()
    return clock
