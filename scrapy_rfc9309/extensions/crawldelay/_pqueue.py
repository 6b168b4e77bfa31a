"""A scheduler priority queue that releases a request only when its host is ready:
politeness kept in the scheduler, as Heritrix, Nutch and StormCrawler keep it.

``SCHEDULER_PRIORITY_QUEUE = "scrapy_rfc9309.pqueues.HostReadyPriorityQueue"`` (the
add-on sets it unless the project chose another).  Like Scrapy's default
``DownloaderAwarePriorityQueue`` (whose per-slot queues and disk layout it keeps, so a
``JOBDIR`` crawl resumes), it holds one priority queue per download slot; unlike it,
it does not scan every slot at every pop.  The slots with queued requests sit in a
heap ordered by the time each may next start a request:

* a slot with a floor (see :mod:`.extensions.crawldelay`) is ready ``floor`` after
  its last request ended, and takes one request at a time: the next leaves the
  scheduler only once the previous one is done (downloaded, or dropped by a
  middleware);
* so does a slot none of whose requests is done yet: its floor is not known before
  its robots.txt is read, which its first request waits for;
* a slot known to have no floor is always ready, up to its concurrency
  (``CONCURRENT_REQUESTS_PER_DOMAIN`` or its ``DOWNLOAD_SLOTS`` entry) of requests
  at a time, and takes turns with the other ready slots.

A pop costs O(log slots) heap work, plus a look at the requests released and not yet
done (those in the downloader: ``CONCURRENT_REQUESTS`` of them, and the ones waiting
there for their host's floor, up to ``CRAWLDELAY_MAX_WAITING`` more).  A slot whose
queue waits for its time costs one heap entry (~100 bytes) and one wake-up of the
engine at that time.
"""

from __future__ import annotations

import heapq
import itertools
import weakref
from collections import Counter, OrderedDict
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.crawler import Crawler
from scrapy.pqueues import DownloaderAwarePriorityQueue, _path_safe
from scrapy.utils.asyncio import CallLaterResult, call_later

from ..._settings import configured_concurrency
from . import _slots
from ._hostclock import host_clock

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request
    from scrapy.pqueues import QueueProtocol

__all__ = ["HostReadyPriorityQueue"]


#: How many slot keys :class:`_Released` remembers as having had a request done; past
#: this many, the least recently done are forgotten (they go one at a time again
#: until their next request is done).
MAX_DONE_KEYS = 100_000


class _Released:
    """The requests the crawler's queues released and the downloader still handles,
    per slot key, and the keys that had one done (shared by the memory and the disk
    queue of one crawler)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.by_key: Counter[str] = Counter()
        self.done: OrderedDict[str, None] = OrderedDict()
        self._requests: dict[Request, str] = {}
        self._wake: CallLaterResult | None = None
        self._wake_at = float("inf")

    def add(self, request: Request, key: str) -> None:
        self._requests[request] = key
        self.by_key[key] += 1

    def settle(self) -> None:
        """Forget the released requests the downloader is done with."""
        for key in _slots.settle(self.crawler, self._requests):
            self.by_key[key] -= 1
            if not self.by_key[key]:
                del self.by_key[key]
            self.done[key] = None
            self.done.move_to_end(key)
            if len(self.done) > MAX_DONE_KEYS:
                self.done.popitem(last=False)

    def wake_engine_at(self, at: float, now: float) -> None:
        """Have the engine ask the scheduler again at *at* (one call pending at most)."""
        if self._wake is not None:
            if self._wake_at <= at:
                return
            self._wake.cancel()
        self._wake_at = at
        self._wake = call_later(max(at - now, 0.0), self._woken)

    def _woken(self) -> None:
        self._wake, self._wake_at = None, float("inf")
        _slots.wake_engine(self.crawler)


_RELEASED: weakref.WeakKeyDictionary[Crawler, _Released] = weakref.WeakKeyDictionary()


class HostReadyPriorityQueue(DownloaderAwarePriorityQueue):
    """Scrapy's per-slot priority queues, popped in the order their slots may next
    start a request (see the module's documentation)."""

    def __init__(
        self,
        crawler: Crawler,
        downstream_queue_cls: type[QueueProtocol],
        key: str,
        slot_startprios: dict[str, Iterable[int]] | None = None,
        *,
        start_queue_cls: type[QueueProtocol] | None = None,
    ) -> None:
        super().__init__(
            crawler, downstream_queue_cls, key, slot_startprios, start_queue_cls=start_queue_cls
        )
        self._clock = host_clock(crawler)
        released = _RELEASED.get(crawler)
        if released is None:
            released = _RELEASED[crawler] = _Released(crawler)
        self._released = released
        concurrency, self._slot_concurrency = configured_concurrency(crawler.settings)
        self._concurrency = concurrency or 1
        self._order = itertools.count()
        self._heap: list[tuple[float, int, str]] = []  # (ready at, order, slot key)
        self._parked: set[str] = set()  # keys with as many requests out as they may have
        for slot in self.pqueues:
            self._schedule(slot, 0.0)

    def _schedule(self, key: str, at: float) -> None:
        heapq.heappush(self._heap, (at, next(self._order), key))

    def _room(self, key: str) -> bool:
        """Whether slot *key* may have one more request out of the scheduler."""
        out = self._released.by_key.get(key, 0)
        if not out:
            return True
        if self._clock.floor(key) or key not in self._released.done:
            return False  # one at a time: end to start, or until the floor is known
        return out < self._slot_concurrency.get(key, self._concurrency)

    def push(self, request: Request) -> None:
        key = self._downloader_interface.get_slot_key(request)
        new = key not in self.pqueues
        super().push(request)
        if new:
            self._schedule(key, 0.0)

    def pop(self) -> Request | None:
        if not self.pqueues:
            return None
        now = self._clock.now()
        self._released.settle()
        for key in [key for key in self._parked if self._room(key)]:
            self._parked.discard(key)
            self._schedule(key, self._clock.ready_at(key))
        heap = self._heap
        while heap:
            at, _, key = heap[0]
            if at > now:
                self._released.wake_engine_at(at, now)
                return None
            heapq.heappop(heap)
            if key not in self.pqueues:
                continue
            if not self._room(key):
                self._parked.add(key)
                continue
            ready_at = self._clock.ready_at(key)
            if ready_at > now:  # its floor was learnt, or a request ended, since
                self._schedule(key, ready_at)
                continue
            return self._pop_from(key, now)
        return None

    def _pop_from(self, key: str, now: float) -> Request | None:
        queue = self.pqueues[key]
        request = queue.pop()
        if len(queue):
            self._schedule(key, now)  # behind the slots already waiting: turns
        else:
            del self.pqueues[key]
            queue.close()
            if self.key:  # a JOBDIR crawl: reclaim the slot's folder, as Scrapy 2.19 does
                with suppress(OSError):  # not empty: its queues kept files
                    Path(self.key, _path_safe(key)).rmdir()
        if request is not None:
            self._released.add(request, key)
        return request

    def peek(self) -> Request | None:
        """The request :meth:`pop` would return now, if any."""
        now = self._clock.now()
        for at, _, key in sorted(self._heap):
            if at > now:
                break
            if key in self.pqueues and self._room(key) and self._clock.ready_at(key) <= now:
                return self.pqueues[key].peek()
        return None
