"""A fleet's shared request queue that is polite by itself, for scrapy-redis:
``SCHEDULER_QUEUE_CLASS = "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"``.

scrapy-redis's own queues hand out requests in their order, whatever their host: a
process takes a slow host's backlog into its own memory, where it waits for the
Crawl-delay (and is lost if the process is killed), while the other processes find
the queue empty.  Here the queue keeps the requests of each politeness unit (a host
by default, see :mod:`._units`) apart, in Scrapy's order (the highest ``priority``
first, first in, first out among equals, as Scrapy's own queues), and a sorted set
of the units by the time each may next be contacted, so a pop returns a request only
of a unit that is ready for the whole fleet (when none is, the engine is woken when
the first one will be; see :mod:`._waker`):

* a unit is held (not ready) from the pop of one of its requests until the process
  that took it says the request ended, then ready ``floor`` later; a unit whose floor
  no process knows yet (its robots.txt not read) is held the same way;
* on the fleet's Redis, the pop of a floored unit's request holds the unit's record
  in the fleet's ledger too (:mod:`scrapy_rfc9309.fleet.script`), in the same call:
  the gate asks Redis nothing more for it;
* a unit known to have no floor stays ready;
* a unit that asked to slow down (see :mod:`._backoff`) is not ready before its hold
  ends, and is floored while it backs off;
* a hold outlives its request by no more than ``DOWNLOAD_TIMEOUT`` and a margin (a
  process killed mid-request holds its units no longer);
* each unit has an owner, the process that takes its requests: given in turn to the
  processes seen lately when the unit is first pushed, so the units, and with them
  the pages, are shared evenly; a ready unit whose owner has not taken it within
  :data:`GRACE` (it is busy, slow or gone) goes to the process that asks, and keeps
  its owner, unless the owner is no longer seen: then the taker owns it.  (Without
  owners, a unit would go to whichever process asks first when it becomes ready:
  Scrapy's engine asks after every response, so the busiest process would take ever
  more.)
* a process is told on its own wake list when another makes a unit of its ready
  to take: a request pushed for it with nothing queued before, or a request of it
  ended with more queued.  Each process waits on its list (asynchronously, on a
  connection of its own), so none polls;
* a process with no request in hand and none of the queue's ready for it is idle
  (a ``RedisSpider`` reads its next start URLs then), and stays open while the
  queue holds requests.

So a process holds at most one request of a floored unit at a time, and a killed one
loses at most its in-flight requests.  Like scrapy-redis's queues, each call is one
synchronous round trip to the scrapy-redis Redis (``REDIS_URL``): a push and a pop a
request (the push through a pipelined asynchronous connection when redis-py's
connection settings allow it), the ends of requests told the same way or by the next
pop, and pops that find no unit ready only as often as waking on time needs: when
the next unit of its own is ready, or another's grace ends, or a word comes on its
wake list.  Its key names add suffixes to scrapy-redis's queue key.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Coroutine
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.request import request_from_dict

from ..._redis import CLIENT_ERRORS, PipelinedRedis, RedisAddress, redis_errors, tls_context
from ..._settings import LEASE_MARGIN, SettingError, data_file, fleet_url, scrapy_redis_url
from ..._shared import offers
from ...fleet.health import FleetHealth, fleet_health
from ...fleet.script import SOURCE, ledger_call
from ...fleet.spacing import PREFIX
from ._politeness import PopHold, politeness
from ._pqueue import HORIZON, path_safe
from ._saved import save, take
from ._waker import EngineWaker

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from ...robots import RobotsEntry

#: Redis is away when a call raises these (a pop that raised would come out of
#: Scrapy's engine at each look); :data:`CLIENT_ERRORS` for this package's client.
REDIS_AWAY: tuple[type[Exception], ...] = (OSError, *CLIENT_ERRORS)
try:
    from scrapy_redis.queue import Base

    REDIS_AWAY = redis_errors()
except ImportError:  # pragma: no cover - scrapy-redis is the user's dependency
    Base = object

logger = logging.getLogger(__name__)

#: The end of a request this process took: its unit, the unit's floor, whether the
#: site saw it (the floor is known), and the token its pop held the unit for.
_End = tuple[str, float, bool, str]

#: The count of queued requests a pop brought back is used for this long (seconds).
COUNT_FRESH = 0.5
#: A process's wait on its wake list lasts at most this long (seconds); between two,
#: it tells the fleet it is still there, if no other call of its did.
LISTEN = 3
#: Without a wake list (no asynchronous connection, or it failed), while nothing is
#: queued the engine looks again this often (seconds).
IDLE_WAKE = 1.0
#: How long a ready unit waits for its owner before another process may take it
#: (seconds): longer than a woken owner takes to look (the waker's jitter), with
#: room for a busy one (at 1.5 s, a process of a CPU-bound fleet fell up to 13%
#: short of an even share of the pages in 2 runs of 20; at 2.5 s, within 1.2% in 6).
GRACE = 2.5
#: A process that has not called for this long (seconds) owns no new unit, and its
#: units go to whoever asks: it is gone (a running one calls every LISTEN at least).
SEEN = 10.0
#: Where requests kept while Redis was away are saved when a process stops before it
#: answers again (a folder of the project's data directory, ``.scrapy``).
SAVED_DIRECTORY = "rfc9309-shared-queue"
#: While Redis cannot be reached, it is tried again this often (seconds): with a
#: ``PING`` on the asynchronous connection when there is one (the reactor never
#: waits on a Redis that is away), else with the next pop.
RETRY = 1.0


#: redis-py's TLS options this package's client does not apply (OCSP checks, verify
#: flags): with any of them, the queue's calls all go through redis-py.
UNMIRRORED_TLS = ("ssl_validate_ocsp", "ssl_ocsp_", "ssl_include_verify", "ssl_exclude_verify")


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _async_client(server: Any, timeout: float = 5.0) -> PipelinedRedis | None:
    """A pipelined asynchronous client to the Redis redis-py's *server* talks to, if
    it connects the way this package's client can (TCP, Unix socket, TLS with
    redis-py's options but its OCSP and verify-flag ones); a reply later than
    *timeout* seconds fails."""
    import redis

    pool = server.connection_pool
    kwargs, kind = pool.connection_kwargs, pool.connection_class
    tls = None
    if kind is redis.SSLConnection:
        if any(kwargs.get(name) for name in kwargs if name.startswith(UNMIRRORED_TLS)):
            return None
        try:
            tls = tls_context(kwargs)
        except (KeyError, ValueError, OSError):  # redis-py says why, when it connects
            return None
    elif kind not in (redis.Connection, redis.UnixDomainSocketConnection):
        return None
    return PipelinedRedis(
        RedisAddress(
            host=kwargs.get("host") or "localhost",
            port=int(kwargs.get("port") or 6379),
            path=kwargs.get("path"),
            tls=tls,
            username=kwargs.get("username"),
            password=kwargs.get("password"),
            db=int(kwargs.get("db") or 0),
            timeout=timeout,
        )
    )


class HostReadyRedisQueue(Base):  # type: ignore[misc]
    """scrapy-redis queue of the requests of each politeness unit, handed out by the
    units' ready times, a unit's by priority."""

    def __init__(self, server: Any, spider: Spider, key: str, serializer: Any = None) -> None:
        import redis

        if not isinstance(server, redis.Redis):
            raise SettingError(
                "HostReadyRedisQueue runs its scripts on one Redis server: it needs "
                "redis-py's client of one (scrapy-redis's default), not "
                f"{type(server).__module__}.{type(server).__qualname__} (REDIS_PARAMS['redis_cls'])"
            )
        super().__init__(server, spider, key, serializer)
        self.crawler = spider.crawler
        self.politeness = politeness(self.crawler)
        # A request handed back would cost a push and a pop on the network: it waits
        # in the gate instead, unless it would wait longer than the engine's turn.
        self.politeness.requeue_after = HORIZON
        self._id = uuid.uuid4().hex
        #: Every script's KEYS: the units by ready time (a sorted set), the requests
        #: left, the units' floors, their owners (hashes), the processes seen lately
        #: (a sorted set by when), the count of units given an owner, the last
        #: request this process popped, and the count of requests ever pushed.
        self.keys = [
            f"{self.key}:{name}"
            for name in (
                "units",
                "count",
                "floors",
                "owners",
                "processes",
                "assigned",
                f"taken:{self._id}",
                "pushed",
            )
        ]
        self._pops = 0  # this process's pops: the last one's number
        self._popped = 0  # the number of the last pop whose request came
        self._list_prefix = f"{self.key}:unit:"
        wake_prefix = f"{self.key}:wake:"  # each process's wake list: this, its id
        self._wake_key = wake_prefix + self._id
        #: The arguments every queue function of the ledger begins with.
        self._argv: list[str | int] = [
            self._list_prefix,
            wake_prefix,
            self._id,
            int(SEEN * 1_000_000),
            PREFIX,
        ]
        timeout = self.crawler.settings.getfloat("DOWNLOAD_TIMEOUT")
        self._lease = int((timeout + LEASE_MARGIN) * 1_000_000)
        self._ledger = server.register_script(SOURCE)
        #: Requests this process's middlewares drop without reaching their site (a
        #: robots.txt at hand refuses them, or their domain's budget is spent): kept
        #: here, not shared, and handed out at once.
        self._dropped: deque[Request] = deque()
        self._offers = offers(self.crawler)
        self._offers.fleet_queue_left = self._fleet_left
        self._waker = EngineWaker(self.crawler)
        # What the last call said: no unit ready before then, and the requests left.
        self._none_before = 0.0
        self._left, self._counted_at = 0, -COUNT_FRESH
        self._called_at = 0.0  # this process's last call: the fleet saw it then
        self._ends: list[_End] = []  # the ends of its requests, for its next call
        self._client = _async_client(server)
        self._calls: set[asyncio.Future[None]] = set()  # kept until done
        self._pushing = 0  # pushes sent, not yet answered
        self._warned = False
        #: Redis could not be reached: until it answers, the fleet's queue is left
        #: alone (its count is the last one seen: an unreachable queue is not an
        #: empty one) and the requests this process schedules are kept here.
        self._away = False
        self._try_at = 0.0  # while away, when Redis is tried again
        self._kept: deque[Request] = deque()
        self._prober: asyncio.Task[None] | None = None
        #: On the fleet's Redis (the add-on's default with scrapy-redis): its absence
        #: is said once with the spacing's and robots.txt's, not in lines of its own.
        self._health: FleetHealth | None = None
        fleet = fleet_url(self.crawler.settings)
        if fleet is not None and fleet == scrapy_redis_url(self.crawler.settings):
            self._health = fleet_health(self.crawler)
            self._health.share_queue()
        # Waiting on the wake list takes a connection of its own.
        self._listener: asyncio.Task[None] | None = None
        self._listening = False  # the wake list is waited on
        self.politeness.on_finished.append(self._finished)
        self._offers.on_robots_decided.append(self._decided)
        self.crawler.signals.connect(self.close, signal=signals.spider_closed)
        self.crawler.signals.connect(self._keep_open, signal=signals.spider_idle)
        old_units, old_lists = f"{self.key}:hosts", f"{self.key}:host:"
        taken_over = self._ledger(
            keys=[old_units, self.keys[0], self.keys[7]],
            args=["take_over", old_lists, self._list_prefix],
        )
        if taken_over:
            logger.info(
                "The shared queue took over %d request(s) an earlier version left in "
                "lists (%s*, %s*), in their order, at priority 0",
                taken_over,
                old_lists,
                self._list_prefix,
            )
        # Seen from the start (scrapy-redis opens its queue as the crawl opens): the
        # units pushed before this process's first pop are shared with it too.
        self._call("join", [])
        self._start_listening()
        self._give_saved()

    def _start_listening(self) -> None:
        """Wait on the wake list from now on, once an event loop runs."""
        if self._listener is None and self._client is not None and _loop_running():
            self._listener = asyncio.ensure_future(self._listen())
            self._listening = True  # until a wait fails

    def _call(self, name: str, args: list[Any]) -> Any:
        """Run the ledger's queue function *name* with a blocking call."""
        self._called_at = self.politeness.now()
        return self._ledger(keys=self.keys, args=[name, *self._argv, *args])

    def __len__(self) -> int:
        """The requests this process may take from the fleet's queue now, and those
        it holds for it (pushes on their way, requests kept while Redis is away or
        that a middleware drops at once): a crawl whose start requests are not in
        Redis yet is not idle.  The fleet's requests do not count while Redis said
        none is ready for this process before a time (and nothing changed here
        since): the engine is then idle, so a scrapy-redis ``RedisSpider`` reads its
        next start URLs (it reads them only when idle), and :meth:`_keep_open` keeps
        the process open for the fleet's requests."""
        local = self._pushing + len(self._dropped) + len(self._kept)
        if self._none_ready(self.politeness.now()):
            return local
        return self._fleet_count() + local

    def _none_ready(self, now: float) -> bool:
        """Redis said no request is ready for this process before a time still to
        come, and nothing changed here since (no end to tell, Redis not away)."""
        return now < self._none_before and not self._ends and not self._away

    def _fleet_count(self) -> int:
        """The requests in the fleet's queue: as the last call saw them, if it was
        less than :data:`COUNT_FRESH` ago (Scrapy asks after every request) or Redis
        cannot be reached, else asked."""
        now = self.politeness.now()
        if now - self._counted_at > COUNT_FRESH and self._may_call(now):
            try:
                count = self.server.get(self.keys[1])
            except REDIS_AWAY as exc:
                self._unreachable(exc)
            else:  # a read: Redis may still refuse writes, a pop will say
                self._count(count, now)
        return self._left

    def _keep_open(self, spider: Any = None) -> None:
        """``spider_idle``: the process stays open while the fleet's queue holds
        requests (the last count seen, while Redis cannot be reached), whatever the
        spider's own idle rule (scrapy-redis's ``MAX_IDLE_TIME_BEFORE_CLOSE``):
        they may be its to take."""
        if self._fleet_count():
            raise DontCloseSpider

    def _fleet_left(self) -> int:
        return self._left

    def _count(self, count: Any, now: float) -> None:
        self._left, self._counted_at = int(count or 0), now

    def push(self, request: Request) -> None:
        """Add *request* to its unit's requests: through the pipelined asynchronous
        connection when there is one (the command is written at the event loop's
        next turn, not waited for), else with a blocking call.  A request whose
        domain's budget is spent, or that a robots.txt at hand refuses, stays here:
        this process drops it at once."""
        if self._offers.will_drop(request):
            self._dropped.append(request)
            return
        if self._away:
            self._kept.append(request)
        else:
            self._send(request)

    def _send(self, request: Request) -> None:
        """Push *request* to Redis (kept here if Redis cannot be reached)."""
        unit = self.politeness.unit(request)
        args = [unit, self._encode(request), request.priority]
        if self._client is not None and _loop_running():
            self._pushing += 1
            self._in_background(self._pushed(request, args))
            return
        self._none_before = 0.0  # its unit may be ready now
        self._push_blocking(request, args)

    async def _pushed(self, request: Request, args: list[Any]) -> None:
        try:
            await self._call_async(self._client, "push", args)
        except CLIENT_ERRORS as exc:
            self._kept.append(request)
            self._unreachable(exc)
            return
        except Exception as exc:
            self._say_once(f"The shared queue could not push a request without blocking ({exc})")
            self._push_blocking(request, args)
        else:
            self._left += 1
        finally:
            self._pushing -= 1
        # Its unit may be ready now; the engine's pop when the request was scheduled
        # came before the push reached Redis: it asks again.
        self._look_at(self.politeness.now())

    def _push_blocking(self, request: Request, args: list[Any]) -> None:
        try:
            self._call("push", args)
        except REDIS_AWAY as exc:
            self._kept.append(request)
            self._unreachable(exc)
        else:
            self._left += 1

    def _decided(self, authority: str, entry: RobotsEntry | None) -> None:
        """*authority*'s robots.txt was decided here: if it refuses every request (it
        is unreachable), its unit's requests are taken out of Redis at once, whatever
        the unit's readiness (a hold, a floor), and dropped here; those of the unit's
        other authorities go back, behind those of their priority."""
        if entry is None or not entry.refuses_all or self._away:
            return
        args = [self.politeness.unit_of_host(urlsplit(authority).hostname or "")]
        if self._client is not None and _loop_running():
            self._in_background(self._take_all(args))
            return
        try:
            self._took(self._call("take_all", args))
        except REDIS_AWAY as exc:
            self._unreachable(exc)

    async def _take_all(self, args: list[Any]) -> None:
        try:
            taken = await self._call_async(self._client, "take_all", args)
        except Exception as exc:  # they stay in Redis, dropped in their unit's turn
            self._failed(exc, "take the requests a robots.txt refuses out of Redis")
            return
        self._took(taken)

    def _took(self, taken: list[Any]) -> None:
        """The requests :meth:`_decided` took: dropped here, or pushed back."""
        self._left -= len(taken)
        for data in taken:
            self.push(self._decode(data))
        self._look_at(self.politeness.now())

    def _encode(self, request: Request) -> Any:
        return self.serializer.dumps(request.to_dict(spider=self.spider))

    def _decode(self, data: Any) -> Request:
        return request_from_dict(self.serializer.loads(data), spider=self.spider)

    def _may_call(self, now: float) -> bool:
        """False while Redis is away and not to be tried again yet."""
        return not self._away or now >= self._try_at

    def _unreachable(self, exc: Exception) -> None:
        """A call found Redis unreachable, or refusing it: say so once, keep what this
        process schedules, and try again every :data:`RETRY` seconds."""
        if self._client is not None and _loop_running():
            self._try_at = float("inf")  # until a PING answers
            if self._prober is None or self._prober.done():
                self._prober = asyncio.ensure_future(self._probe())
        else:
            self._try_at = self.politeness.now() + RETRY
            self._waker.wake_in(RETRY)
        was_away, self._away = self._away, True
        if self._health is not None:
            self._health.failed(exc, "fleet/queue_unreachable")
            return
        self.crawler.stats.inc_value("fleet/queue_unreachable")
        if not was_away:
            logger.warning(
                "The shared queue cannot use Redis (%s): until it answers again, this "
                "process takes no request from it and crawls those it schedules itself",
                exc,
            )

    async def _probe(self) -> None:
        while True:
            await asyncio.sleep(RETRY)
            try:
                await self._client.call("PING")  # type: ignore[union-attr]
            except Exception:
                continue
            self._try_at = 0.0
            self._look_at(self.politeness.now())
            return

    def _reachable(self, asked_at: float) -> None:
        """A blocking call asked at *asked_at* (:func:`time.monotonic`) was answered:
        after an absence, say so once, and share the requests kept meanwhile."""
        if not self._away:
            return
        self._away = False
        if self._health is not None:
            self._health.answered(asked_at)
        else:
            logger.warning("The shared queue uses Redis again")
        self._share_kept()

    def _share_kept(self) -> None:
        """Push the requests kept while Redis was away (kept again if it still is)."""
        kept, self._kept = self._kept, deque()
        for request in kept:
            self._send(request)

    def _in_background(self, call: Coroutine[Any, Any, None]) -> None:
        future = asyncio.ensure_future(call)
        self._calls.add(future)
        future.add_done_callback(self._background_done)

    async def flush(self) -> None:
        """Wait until what this process sent Redis in the background (pushes, the ends
        of requests) is answered."""
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)

    def _background_done(self, future: asyncio.Future[None]) -> None:
        self._calls.discard(future)
        if not future.cancelled() and future.exception() is not None:
            logger.error("The shared queue lost a request", exc_info=future.exception())

    async def _call_async(self, client: PipelinedRedis | None, name: str, args: list[Any]) -> Any:
        """Run the ledger's queue function *name* through an asynchronous connection;
        its reply."""
        assert client is not None
        self._called_at = self.politeness.now()
        return await ledger_call(client, name, self.keys, *self._argv, *args)

    async def _listen(self) -> None:
        """Wait on this process's wake list, on a connection of its own, and have the
        engine look when another process says a unit of this one's may be ready (it
        pushed one, or ended a request of one with more queued).  Between two waits,
        tell the fleet this process is still there, unless another call did.  While
        the list cannot be waited on, the engine looks every :data:`IDLE_WAKE`."""
        client = _async_client(self.server, timeout=LISTEN + 5.0)
        assert client is not None  # as for self._client
        try:
            while True:
                try:
                    if self.politeness.now() - self._called_at >= LISTEN:
                        await self._call_async(client, "join", [])
                    woken = await client.call("BLPOP", self._wake_key, LISTEN)
                except CLIENT_ERRORS as exc:
                    self._listening = False
                    self._unreachable(exc)
                    await asyncio.sleep(LISTEN)
                    continue
                except Exception as exc:
                    self._listening = False
                    self._say_once(f"The shared queue could not wait on its wake list ({exc})")
                    await asyncio.sleep(LISTEN)
                    continue
                self._listening = True
                if woken is not None:
                    self._look_at(self.politeness.now())
        finally:
            client.close()

    def _failed(self, exc: Exception, doing: str) -> None:
        """A background call failed *doing* something: Redis cannot serve it (see
        :data:`CLIENT_ERRORS`), or (said once) something else went wrong."""
        if isinstance(exc, CLIENT_ERRORS):
            self._unreachable(exc)
        else:
            self._say_once(f"The shared queue could not {doing} ({exc})")

    def _say_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("%s (said once)", message)

    def pop(self, timeout: int = 0) -> Request | None:
        """The next request for this process, or None.  *timeout* (scrapy-redis's
        ``SCHEDULER_IDLE_BEFORE_CLOSE``) is not waited: a pop never blocks the
        reactor longer than one round trip; a process is woken when a request is
        ready for it."""
        if self._dropped:
            return self._dropped.popleft()
        self._start_listening()
        now = self.politeness.now()
        if not self._may_call(now):
            return self._kept.popleft() if self._kept else None
        if self._none_ready(now):
            self._waker.wake_in(self._none_before - now)
            return None
        # Without the gate no end is seen: a unit is not held for a request's lease.
        lease = self._lease if self.politeness.tracking else 0
        ends = self._take_ends()
        self._pops += 1
        args = [lease, int(GRACE * 1_000_000), self._pops, self._popped, *self._told(ends)]
        try:
            asked = monotonic()
            data, token, held_with, wait, count = self._call("pop", args)
        except REDIS_AWAY as exc:
            self._keep_ends(ends)
            self._unreachable(exc)
            return self._kept.popleft() if self._kept else None
        self._reachable(asked)
        self._count(count, now)
        if not data:
            # Nothing ready here before *wait*: the engine asks again after every
            # request, which would be a call each, so it is woken then.  Whatever
            # another process makes ready for this one, it says through the wake
            # list; without one, it is looked for every IDLE_WAKE.
            if wait is not None:
                seconds = int(wait) / 1_000_000
                if not self._listening:
                    seconds = min(seconds, IDLE_WAKE)
            elif not self._listening:
                seconds = IDLE_WAKE
            else:
                return None  # nothing known: Scrapy's heartbeat asks again
            self._none_before = now + seconds
            self._waker.wake_in(seconds)
            return None
        self._popped = self._pops
        request = self._decode(data)
        hold = None
        if token:
            fleet = self._health is not None  # the fleet's spacing is on this Redis
            hold = PopHold(token.decode(), int(held_with) / 1_000_000, fleet)
            if fleet:
                self.crawler.stats.inc_value("fleet/acquired_by_pop")
        self.politeness.released(request, self.politeness.unit(request), hold)
        return request

    def _finished(self, request: Request, unit: str, reached: bool, hold: PopHold | None) -> None:
        """A request this process took is done: the unit is ready again ``floor``
        after it ended (or at once, if the site never saw it), and its pop's *hold*
        ends."""
        token = hold.token if hold is not None else ""
        if not reached:
            self._ended(unit, 0.0, False, token)
            return
        # Told even for a unit known to have no floor: Redis may have dropped it
        # since (done with), and placed it again, new, until this end.
        self._ended(unit, self.politeness.floor(unit), True, token)

    def _ended(self, unit: str, floor: float, known: bool, token: str) -> None:
        """Tell Redis a request of *unit* ended now, without blocking the reactor:
        through a pipelined asynchronous connection to the queue's Redis; or, when
        that client cannot reach it as redis-py does (custom TLS settings), with the
        next pop (the engine asks for a request as soon as one ends)."""
        self._ends.append((unit, floor, known, token))
        if self._client is not None and _loop_running() and not self._away:
            self._in_background(self._tell(self._take_ends()))

    async def _tell(self, ends: list[_End]) -> None:
        try:
            soonest = await self._call_async(self._client, "ended", self._told(ends))
        except Exception as exc:  # told with the next call
            self._keep_ends(ends)
            self._failed(exc, "tell Redis a request ended")
            return
        if soonest is not None:
            # A unit with requests queued may start in *soonest*: the engine asks
            # Redis then (a pop meanwhile, as the engine asks when a request ends,
            # may not have seen this end).
            self._look_at(self.politeness.now() + int(soonest) / 1_000_000)

    def _look_at(self, ready: float) -> None:
        """A unit may be ready for this process at *ready* (on the politeness
        clock): the engine asks Redis then."""
        self._none_before = min(self._none_before, ready)
        self._waker.wake_in(ready - self.politeness.now())

    def _take_ends(self) -> list[_End]:
        """The ends noted since the last call; to :meth:`_keep_ends` if it fails."""
        ends, self._ends = self._ends, []
        return ends

    def _keep_ends(self, ends: list[_End]) -> None:
        self._ends[:0] = ends

    def _told(self, ends: list[_End]) -> list[str | int]:
        """*ends* as the ledger takes them (its ``apply_ends``)."""
        now = self.politeness.now()
        told: list[str | int] = []
        for unit, floor, known, token in ends:
            held = int((self.politeness.held_until(unit) - now) * 1_000_000)
            told += [unit, int(floor * 1_000_000), int(known), held, token]
        return told

    async def close(self, spider: Any = None) -> None:
        """The crawl closes: stop waiting on the wake list, wait for the pushes and
        ends in flight, tell Redis the ends no pop took (the other processes would
        otherwise wait for this one's units until their leases end), and leave the
        fleet: no new unit is given to this process, and its units go to the
        processes that ask once their grace ends.  Requests kept while Redis was
        away are given to it, or saved for the next process (:meth:`_save_kept`)."""
        for task in (self._listener, self._prober):
            if task is not None:
                task.cancel()
        self._share_kept()  # one last try for the requests kept while Redis was away
        await self.flush()
        if self._kept:
            await self._save_kept()
            if self._client is not None:
                self._client.close()
            return
        told = self._told(self._take_ends())
        try:
            if self._client is None:  # blocking, as every call of this process
                if told:
                    self._call("ended", told)
                self.server.zrem(self.keys[4], self._id)
                self.server.delete(self.keys[6])
                return
            if told:
                await self._call_async(self._client, "ended", told)
            await self._client.call("ZREM", self.keys[4], self._id)
            await self._client.call("DEL", self.keys[6])
        except REDIS_AWAY as exc:  # the leases end the holds
            self._say_once(f"The shared queue could not tell Redis it closes ({exc})")
        finally:
            if self._client is not None:
                self._client.close()

    def _saved_where(self) -> tuple[Path, str]:
        """The folder of saved requests, and this queue's name there: its Redis
        server, database and key."""
        kwargs = self.server.connection_pool.connection_kwargs
        server = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
        name = path_safe(f"{server}/{kwargs.get('db') or 0}/{self.key}")
        return Path(data_file(SAVED_DIRECTORY)), name

    async def _save_kept(self) -> None:
        """The process stops and Redis is still away: save the requests kept
        meanwhile, for the next process of the project on this machine to open this
        queue (:meth:`_give_saved`); the file is written on a thread (it is synced
        to disk)."""
        kept, self._kept = self._kept, deque()
        try:
            records = [self._encode(request) for request in kept]
            path = await asyncio.to_thread(save, *self._saved_where(), self._id, records)
        except Exception as exc:
            logger.error(
                "The shared queue closes with %d request(s) scheduled while Redis was "
                "away and not given to it since, and could not save them (%s): they are lost",
                len(kept),
                exc,
            )
            return
        logger.warning(
            "The shared queue closes with %d request(s) scheduled while Redis was away "
            "and not given to it since: saved in %s, for the next process of this "
            "project on this machine that opens the queue",
            len(kept),
            path,
        )

    def _give_saved(self) -> None:
        """Push the requests a stopped process saved for this queue (see
        :meth:`_save_kept`)."""
        directory, name = self._saved_where()
        if not directory.is_dir():
            return
        where: Path = directory
        try:
            for where, records in take(directory, name, self._id):
                requests = [self._decode(data) for data in records]  # all, or none
                for request in requests:
                    self.push(request)
                logger.warning(
                    "The shared queue gives Redis %d request(s) a process saved in %s "
                    "when it stopped while Redis was away",
                    len(requests),
                    where,
                )
        except Exception as exc:  # the file stays, renamed as taken by this process
            logger.error("The shared queue could not read the requests saved in %s: %s", where, exc)

    def clear(self) -> None:
        units = self.server.zrange(self.keys[0], 0, -1)
        names = [self._list_prefix + unit.decode() for unit in units]
        # The owners' sets, the wake lists, the processes' last requests.
        for pattern in (f"{self.keys[3]}:*", f"{self.key}:wake:*", f"{self.key}:taken:*"):
            names += self.server.scan_iter(match=pattern)
        self.server.delete(*self.keys, *names)
