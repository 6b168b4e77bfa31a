"""A scheduler priority queue that hands out the request of the politeness unit that
is ready soonest: politeness kept in the scheduler, as Heritrix, Nutch and
StormCrawler keep it.

``SCHEDULER_PRIORITY_QUEUE = "scrapy_rfc9309.pqueues.HostReadyPriorityQueue"`` (the
add-on sets it with the throttle on).  It is written against Scrapy's priority-queue
interface, and holds one Scrapy ``ScrapyPriorityQueue`` per unit (a host by default;
with ``JOBDIR``, one folder per unit, as Scrapy's ``DownloaderAwarePriorityQueue``
lays them out, so a crawl resumes).  The units with queued requests sit in a heap
ordered by the time each may next start a request (see :mod:`._politeness`):

* a floored unit takes one request at a time: the next leaves the scheduler only once
  the previous one is done (downloaded, dropped by a middleware, answered by a
  cache), and is ready ``floor`` after it ended;
* so does a unit none of whose requests is done yet: its floor is not known before
  its robots.txt is read; that read starts when the unit's turn comes, while its
  requests stay here (a page waiting for it in the robots middleware would hold a
  place of the downloader), and the unit is back in turn once it is decided;
* a unit known to have no floor is ready unless held, up to its concurrency
  (its download slot's: see :func:`._politeness.concurrency`) of requests
  at a time, and takes turns with the other ready units.

A pop returns a ready unit's request if there is one; else the request of the unit
ready soonest, if within :data:`HORIZON` seconds (it waits for its time in the gate,
holding a place no other unit could use); else nothing, and the engine asks again
when a request ends or at its next heartbeat.  A pop costs O(log units).

A request that a robots.txt at hand refuses (its site unreachable, so everything
disallowed) never reaches the site: it is handed out at once, whatever its unit's
readiness or hold, and dropped by the robots middleware.

Scrapy's next start request waits (``StartPaceMiddleware``, :meth:`_start_room`)
while as many units as the reads run at once came with their robots.txt unread and
wait for that read, or while ``CONCURRENT_REQUESTS`` start items wait that the
engine has not asked for (its downloader is full): a broad crawl's start
requests, each of a new unit, would otherwise all wait here.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
from collections import deque
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.pqueues import ScrapyPriorityQueue
from scrapy.utils.defer import deferred_from_coro

from ..._shared import offers
from ...ledger import INFINITY
from ._gate import META_EARLY
from ._politeness import politeness
from ._waker import EngineWaker

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from ..._shared import BudgetRefusal
    from ...robots import RobotsEntry

__all__ = ["HostReadyPriorityQueue"]

#: A unit ready within this many seconds may have its request handed out before it
#: is ready, when no unit is ready: Scrapy's engine asks the scheduler at least this
#: often (its heartbeat), so no unit waits for the engine longer than it would
#: anyway, and no place waits in the gate longer than this.
HORIZON = 5.0


def path_safe(key: str) -> str:
    """A folder name for unit *key*: its safe characters, then a digest of it (two
    keys that differ only in unsafe characters stay apart)."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in key)
    return f"{safe}-{hashlib.md5(key.encode('utf8')).hexdigest()}"


class HostReadyPriorityQueue:
    """Scrapy's priority queues, one per politeness unit, popped in the order their
    units may next start a request (see the module's documentation)."""

    @classmethod
    def from_crawler(
        cls,
        crawler: Crawler,
        downstream_queue_cls: type[Any],
        key: str,
        startprios: dict[str, Iterable[int]] | None = None,
        *,
        start_queue_cls: type[Any] | None = None,
    ) -> Self:
        return cls(crawler, downstream_queue_cls, key, startprios, start_queue_cls=start_queue_cls)

    def __init__(
        self,
        crawler: Crawler,
        downstream_queue_cls: type[Any],
        key: str,
        startprios: dict[str, Iterable[int]] | None = None,
        *,
        start_queue_cls: type[Any] | None = None,
    ) -> None:
        if startprios and not isinstance(startprios, dict):
            raise ValueError(
                "HostReadyPriorityQueue resumes only a JOBDIR state it wrote itself (a dict "
                f"of units), not {type(startprios).__name__}"
            )
        self.crawler = crawler
        self.downstream_queue_cls = downstream_queue_cls
        self.start_queue_cls = start_queue_cls
        self.key = key
        self.politeness = politeness(crawler)
        self.politeness.on_done.append(self._unpark)
        self._offers = offers(crawler)
        self._offers.on_robots_decided.append(self._decide)
        self._offers.on_budget_spent.append(self._hand_out_spent)
        # Requests handed out early wait in the gate, each holding a place, and the
        # robots.txt reads this queue starts each take one: at most half of
        # CONCURRENT_REQUESTS of each, so that they never fill the downloader (a full
        # downloader has Scrapy read every start request into the scheduler).
        self._places = crawler.settings.getint("CONCURRENT_REQUESTS")
        self._most_early = max(1, self._places // 2)
        self._reading: set[str] = set()  # units whose robots.txt is read ahead
        self._unread: dict[str, None] = {}  # units waiting for a read to start, in order
        # Units queued whose robots.txt was unread when they came, until a read of it
        # starts or a request of theirs leaves: the start requests wait while they
        # are as many as the reads run at once (see start_room).
        self._new: set[str] = set()
        self._started = 0  # start items let go that the engine has not taken yet
        self._start_waiter: asyncio.Future[None] | None = None
        self._offers.start_room = self._start_room
        self._waker = EngineWaker(crawler, jitter=0.0)
        self.queues: dict[str, ScrapyPriorityQueue] = {}
        self.politeness.queued_units.append(self.queues.keys)
        self._size = 0
        self._order = itertools.count()
        self._heap: list[tuple[float, int, str]] = []  # (ready at, order, unit key)
        self._parked: set[str] = set()  # units with as many requests out as they may have
        self._decided: deque[Request] = deque()  # refused by a robots.txt at hand
        # Units whose next requests a middleware may drop: looked at first (_hand_out).
        self._looked_at: deque[str] = deque()
        for unit, prios in (startprios or {}).items():
            queue = self.queues[unit] = self._queue(unit, prios)
            self._size += len(queue)
            self._schedule(unit, 0.0)

    def _queue(self, unit: str, startprios: Iterable[int] = ()) -> ScrapyPriorityQueue:
        return ScrapyPriorityQueue.from_crawler(
            self.crawler,
            self.downstream_queue_cls,
            f"{self.key}/{path_safe(unit)}",
            startprios,
            start_queue_cls=self.start_queue_cls,
        )

    def _schedule(self, unit: str, at: float) -> None:
        heapq.heappush(self._heap, (at, next(self._order), unit))

    def _room(self, unit: str) -> bool:
        """Whether unit *unit* may have one more request out of the scheduler."""
        out = self.politeness.out.get(unit, 0)
        if not out:
            return True
        if self.politeness.floor(unit) or unit not in self.politeness.done:
            return False  # one at a time: end to start, or until the floor is known
        return out < self.politeness.concurrency(unit)

    def _unpark(self, unit: str) -> None:
        if unit in self._parked and self._room(unit) and self.politeness.ready_at(unit) != INFINITY:
            self._parked.discard(unit)
            self._schedule(unit, self.politeness.ready_at(unit))

    def __len__(self) -> int:
        return self._size + len(self._decided)

    def push(self, request: Request) -> None:
        if self._offers.will_drop(request):
            self._decided.append(request)
            return
        unit = self.politeness.unit(request)
        queue = self.queues.get(unit)
        if queue is None:
            queue = self.queues[unit] = self._queue(unit)
            unread = self._offers.robots_unread
            if unread is not None and unread(request):
                self._new.add(unit)
            if unit not in self._parked:
                self._schedule(unit, 0.0)
        queue.push(request)
        self._size += 1

    def pop(self) -> Request | None:
        request = self._pop()
        # The engine took one request, or found none to take: room for as many
        # start items (see _start_full).
        self._started = 0 if request is None else max(0, self._started - 1)
        self._wake_start()
        return request

    def _pop(self) -> Request | None:
        if self._decided:
            return self._decided.popleft()
        dropped = self._next_dropped()
        if dropped is not None:
            return dropped
        polite = self.politeness
        now = polite.now()
        heap = self._heap
        while heap:
            at, _, unit = heap[0]
            if unit not in self.queues:
                heapq.heappop(heap)
                continue
            if not self._room(unit):
                heapq.heappop(heap)
                self._parked.add(unit)
                continue
            ready_at = polite.ready_at(unit)
            if ready_at == INFINITY:  # a request of it in progress (a robots.txt fetch)
                heapq.heappop(heap)
                self._parked.add(unit)
                continue
            if ready_at > at:  # its floor was learnt, a hold began, or a request ended
                heapq.heapreplace(heap, (ready_at, next(self._order), unit))
                continue
            early = ready_at > now
            if at > now + HORIZON or (early and len(polite.early) >= self._most_early):
                return None
            heapq.heappop(heap)
            if self._reads_robots(unit):
                continue
            request = self._pop_from(unit, now)
            if request is None:  # a queue that had nothing after all
                continue
            if early:
                request.meta[META_EARLY] = True
                polite.early.add(request)
            return request
        return None

    def _reads_robots(self, unit: str) -> bool:
        """Whether *unit*'s next request would wait for its site's robots.txt (a new
        site's, or one whose copy expired): then that read starts, or waits for one of
        the :attr:`_most_early` places, and the unit leaves the heap until it ends,
        its request kept here rather than holding a place of the downloader."""
        head = self._unread_head(unit)
        if head is None:
            return False
        if unit in self._reading:
            return True
        if len(self._reading) >= self._most_early:
            self._unread[unit] = None
        else:
            self._start_read(unit, head)
        return True

    def _unread_head(self, unit: str) -> Request | None:
        """*unit*'s next request if it would wait for its site's robots.txt."""
        if self._offers.robots_unread is None or self._offers.robots_read_ahead is None:
            return None
        head = self._head(unit)  # unseen (a queue that cannot peek): it waits there
        if head is None or self._offers.will_drop(head) or not self._offers.robots_unread(head):
            return None
        return head

    def _head(self, unit: str) -> Request | None:
        """The next request of *unit*'s queue, if it has one and can show it."""
        queue = self.queues.get(unit)
        try:
            return queue.peek() if queue is not None else None
        except NotImplementedError:  # a downstream queue without peek
            return None

    def _start_full(self) -> bool:
        """Whether another start request should wait: as many units wait for their
        robots.txt read as the reads run at once, or ``CONCURRENT_REQUESTS`` start
        items wait here that the engine has not asked for (it asks while its
        downloader has room; each request it takes makes room for one more, and a
        look that finds none ready for as many)."""
        return len(self._new) >= self._most_early or self._started >= self._places

    async def _start_room(self, most: float) -> None:
        """Return once another start request is welcome (see :meth:`_start_full`), or
        after *most* seconds."""
        if self._start_full():
            if self._start_waiter is None or self._start_waiter.done():
                self._start_waiter = asyncio.get_running_loop().create_future()
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._start_waiter), most)
        self._started += 1

    def _wake_start(self) -> None:
        waiter = self._start_waiter
        if waiter is not None and not waiter.done() and not self._start_full():
            waiter.set_result(None)

    def _not_new(self, unit: str) -> None:
        self._new.discard(unit)
        self._wake_start()

    def _start_read(self, unit: str, head: Request) -> None:
        assert self._offers.robots_read_ahead is not None  # _unread_head saw it
        self._unread.pop(unit, None)
        self._not_new(unit)
        self._reading.add(unit)
        self.crawler.stats.inc_value("crawldelay/robots_read_ahead")
        self._offers.robots_read_ahead(head, partial(self._read, unit))

    def _read(self, unit: str) -> None:
        """*unit*'s robots.txt read ahead is decided: it goes back in the heap, with
        the units waiting for a read, one for each place free, in their order: the
        next look starts their reads as they are ready (a unit held meanwhile waits
        for its hold in the heap, not in the gate)."""
        self._reading.discard(unit)
        now = self.politeness.now()
        self._schedule(unit, now)
        refusal, head = self._offers.budget_refusal, self._head(unit)
        if refusal is not None and head is not None and self.politeness.ready_at(unit) > now:
            # It waits for its floor: a request its budget will drop waits for nothing.
            deferred_from_coro(self._ask_budget(refusal, head))
        free = self._most_early - len(self._reading)
        for waiting in list(itertools.islice(self._unread, max(free, 0))):
            del self._unread[waiting]
            self._schedule(waiting, now)
        self._waker.wake_in(0.0)

    async def _ask_budget(self, refusal: BudgetRefusal, request: Request) -> None:
        """Ask the budget whether it drops *request*: if so, it remembers the domain
        spent, and this queue hands its requests out at once."""
        if await refusal(request, count=False) is not None:
            self._waker.wake_in(0.0)

    def _pop_from(self, unit: str, now: float) -> Request | None:
        request = self._take(unit)
        if unit in self.queues:
            self._schedule(unit, now)  # behind the units already waiting: turns
        if request is not None:
            self.politeness.released(request, unit)
        return request

    def _take(self, unit: str) -> Request | None:
        """The next request of *unit*'s queue; the queue is closed once empty.  The
        unit no longer holds the start requests back (see :meth:`_start_full`)."""
        self._not_new(unit)
        queue = self.queues[unit]
        request = queue.pop()
        if not len(queue):
            del self.queues[unit]
            queue.close()
            if self.key:  # a JOBDIR crawl: reclaim the unit's folder, as Scrapy does
                with suppress(OSError):  # not empty: its queues kept files
                    Path(self.key, path_safe(unit)).rmdir()
        if request is not None:
            self._size -= 1
        return request

    def _decide(self, authority: str, entry: RobotsEntry | None) -> None:
        """If every request to *authority* is refused by its robots.txt now (it is
        unreachable), hand its unit's queued requests out at once: they never reach
        it."""
        if entry is None or not entry.refuses_all:
            return
        self._hand_out(self.politeness.unit_of_host(urlsplit(authority).hostname or ""))

    def _hand_out_spent(self) -> None:
        """A domain's budget was found spent: hand out at once the requests it drops."""
        self._looked_at.extend(self.queues)

    def _hand_out(self, unit: str) -> None:
        """Hand out at once, whatever the unit's readiness, the requests at the head of
        *unit*'s queue that a middleware will drop without reaching the site, up to
        the first it will not; the queue keeps its order (LIFO or FIFO)."""
        if unit in self.queues:
            self._looked_at.append(unit)

    def _next_dropped(self) -> Request | None:
        """The next request of a unit looked at (:meth:`_hand_out`) that a middleware
        will drop, if any."""
        while self._looked_at:
            unit = self._looked_at[0]
            head = self._head(unit)  # unseen: dropped in its turn, when the unit is ready
            if head is not None and self._offers.will_drop(head):
                return self._take(unit)
            self._looked_at.popleft()
        return None

    def close(self) -> dict[str, list[int]]:
        """The state a ``JOBDIR`` crawl resumes from: each unit's priorities."""
        return {unit: queue.close() for unit, queue in self.queues.items()}
