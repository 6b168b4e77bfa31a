"""A fleet's shared request queue that is polite by itself, for scrapy-redis:
``SCHEDULER_QUEUE_CLASS = "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"``.

scrapy-redis's own queues hand out requests in their order, whatever their host: a
process takes a slow host's backlog into its own memory, where it waits for the
Crawl-delay (and is lost if the process is killed), while the other processes find
the queue empty.  Here the queue keeps one list per politeness unit (a host by
default, see :mod:`._units`) and a sorted set of the units by the time each may next
be contacted, so a pop returns a request only of a unit that is ready for the whole
fleet (when none is, the engine is woken when the first one will be, or within half
a second: another process may push a ready one meanwhile; see :mod:`._waker`):

* a unit is held (not ready) from the pop of one of its requests until the process
  that took it says the request ended, then ready ``floor`` later; a unit whose floor
  no process knows yet (its robots.txt not read) is held the same way;
* a unit known to have no floor stays ready;
* a unit that asked to slow down (see :mod:`._backoff`) is not ready before its hold
  ends, and is floored while it backs off;
* a hold outlives its request by no more than ``DOWNLOAD_TIMEOUT`` and a margin (a
  process killed mid-request holds its units no longer);
* each unit has an owner, the process that takes its requests: given in turn to the
  processes seen lately when the unit is first pushed, so the units, and with them
  the pages, are shared evenly; a ready unit whose owner has not taken it within
  :data:`GRACE` (it is busy or slow) goes to the process that asks, and keeps its
  owner; a unit whose owner is no longer seen (gone) goes to the process that asks,
  which owns it from then on.  (Without owners, a unit would go to whichever process
  asks first when it becomes ready: Scrapy's engine asks after every response, so
  the busiest process would take ever more.)

So a process holds at most one request of a floored unit at a time, and a killed one
loses at most its in-flight requests.  Like scrapy-redis's queues, each call is one
synchronous round trip to the scrapy-redis Redis (``REDIS_URL``): a push and a pop a
request (the push through a pipelined asynchronous connection when redis-py's
connection settings allow it), the ends of requests told the same way or by the next
pop, and pops that find no unit ready only as often as waking on time needs: when
the next unit is ready, or its owner's grace ends; when nothing is queued, every
:data:`IDLE_WAKE` (a unit pushed by another process may be this one's).  Its key
names add suffixes to scrapy-redis's queue key.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import uuid
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.request import request_from_dict

from ..._redis import PipelinedRedis, RedisAddress, RedisReplyError
from ..._settings import LEASE_MARGIN
from ._politeness import politeness
from ._pqueue import HORIZON
from ._waker import EngineWaker

if TYPE_CHECKING:
    from scrapy import Request, Spider

try:
    from scrapy_redis.queue import Base
except ImportError:  # pragma: no cover - scrapy-redis is the user's dependency
    Base = object

_NOW = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
#: This process (ARGV[3]) is seen now; the processes seen lately are KEYS[5]'s members
#: scored within ARGV[4] microseconds (older ones are dropped).  Every script that
#: takes it has these two arguments there.
_SEEN = """
redis.call('ZADD', KEYS[5], string.format('%.0f', now), ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', string.format('(%.0f', now - tonumber(ARGV[4])))
"""
#: ARGV[3] = this process's id, ARGV[4] = how long a process counts as seen.
_JOIN = _NOW + _SEEN + "return 1\n"
#: KEYS: see :attr:`HostReadyRedisQueue.keys`.  ARGV = list key prefix, host, this
#: process's id, how long a process counts as seen (microseconds), encoded request.
#: A new unit's owner: the processes seen lately, sorted, in turn.
_PUSH = (
    _NOW
    + _SEEN
    + """
redis.call('RPUSH', ARGV[1] .. ARGV[2], ARGV[5])
redis.call('INCR', KEYS[2])
if redis.call('ZADD', KEYS[1], 'NX', string.format('%.0f', now), ARGV[2]) == 1 then
  local processes = redis.call('ZRANGE', KEYS[5], 0, -1)
  table.sort(processes)
  local turn = redis.call('INCR', KEYS[6])
  redis.call('HSET', KEYS[4], ARGV[2], processes[turn % #processes + 1])
end
return 1
"""
)
#: The ends of this process's requests since its last call, applied before a pop
#: (or alone, at the close): from ARGV[first] on, groups of four: the unit, its floor
#: (microseconds), whether the floor is known (1) or the request was dropped before
#: the site saw it (0), and in how many microseconds from now the unit is ready (its
#: floor after the request's end, or the end of its hold; less than 0: already).
#: KEYS[1] = hosts zset, KEYS[3] = floors hash.
_ENDS = """
for i = first, #ARGV, 4 do
  if ARGV[i + 2] == '1' then redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
  local ready = now + tonumber(ARGV[i + 3])
  redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', ready), ARGV[i])
end
"""
#: ARGV = the ends (see _ENDS).
_ENDED = _NOW + "local first = 1\n" + _ENDS + "return 1\n"
#: ARGV = list key prefix, lease, this process's id, how long a process counts as
#: seen, grace (microseconds), then the ends of this process's requests since its
#: last call (see _ENDS).  Returns {request or false, microseconds until the next unit is ready or
#: false, the requests left}.  A unit whose list the pop empties keeps its place (and
#: its hold): a request pushed for it meanwhile waits for the hold too.  A ready unit
#: with an empty list is dropped from the set (and loses its owner) when a pop meets
#: it.  A ready unit another process owns is taken only once it has been ready for
#: ``grace`` (the owner stays), or its owner is no longer seen (this one owns it).
_POP = (
    _NOW
    + "local first = 6\n"
    + _ENDS
    + _SEEN
    + """
local grace = tonumber(ARGV[5])
local soonest = false
local ready = redis.call(
  'ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now), 'WITHSCORES', 'LIMIT', 0, 20)
for i = 1, #ready, 2 do
  local host, score = ready[i], tonumber(ready[i + 1])
  local owner = redis.call('HGET', KEYS[4], host)
  local others = owner and owner ~= ARGV[3] and redis.call('ZSCORE', KEYS[5], owner)
  if others and now < score + grace then
    local wait = score + grace - now
    if not soonest or wait < soonest then soonest = wait end
  else
    local data = redis.call('LPOP', ARGV[1] .. host)
    if data then
      redis.call('DECR', KEYS[2])
      if not others then redis.call('HSET', KEYS[4], host, ARGV[3]) end
      local floor = tonumber(redis.call('HGET', KEYS[3], host) or '-1')
      local until_ = now
      if floor ~= 0 then until_ = now + tonumber(ARGV[2]) end
      redis.call('ZADD', KEYS[1], string.format('%.0f', until_), host)
      return {data, false, redis.call('GET', KEYS[2])}
    end
    redis.call('ZREM', KEYS[1], host)
    redis.call('HDEL', KEYS[4], host)
  end
end
local next = redis.call(
  'ZRANGEBYSCORE', KEYS[1], string.format('(%.0f', now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #next > 0 then
  local wait = tonumber(next[2]) - now
  if not soonest or wait < soonest then soonest = wait end
end
local count = redis.call('GET', KEYS[2])
if not soonest then return {false, false, count} end
return {false, string.format('%.0f', soonest), count}
"""
)


logger = logging.getLogger(__name__)

#: When no unit is ready, the engine looks again after at most this long (seconds,
#: and a jitter: see :mod:`._waker`): other processes may push ready units meanwhile.
MAX_WAKE = 0.5
#: While nothing is queued, the engine looks again this often (seconds).
IDLE_WAKE = 1.0
#: How long a ready unit waits for its owner before another process may take it
#: (seconds): longer than an idle owner takes to look (IDLE_WAKE and the jitter),
#: with room for a busy one (at 1.5 s, a process of a CPU-bound fleet fell up to 13%
#: short of an even share of the pages in 2 runs of 20; at 2.5 s, within 1.2% in 6).
GRACE = 2.5
#: A process that has not called for this long (seconds) owns no new unit, and its
#: units go to whoever asks: it is gone (an idle one calls every IDLE_WAKE).
SEEN = 10.0


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _async_client(server: Any) -> PipelinedRedis | None:
    """A pipelined asynchronous client to the Redis redis-py's *server* talks to, if
    it connects the way this package's client can (TCP, Unix socket, TLS with the
    default certificate checks)."""
    import redis

    pool = server.connection_pool
    kwargs, kind = pool.connection_kwargs, pool.connection_class
    tls = None
    if kind is redis.SSLConnection:
        if any(kwargs.get(name) for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")):
            return None
        tls = ssl.create_default_context()
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
            timeout=5.0,
        )
    )


class HostReadyRedisQueue(Base):  # type: ignore[misc]
    """scrapy-redis queue of one list per politeness unit, handed out by the units'
    ready times."""

    def __init__(self, server: Any, spider: Spider, key: str, serializer: Any = None) -> None:
        super().__init__(server, spider, key, serializer)
        self.crawler = spider.crawler
        self.politeness = politeness(self.crawler)
        # A request handed back would cost a push and a pop on the network: it waits
        # in the gate instead, unless it would wait longer than the engine's turn.
        self.politeness.requeue_after = HORIZON
        #: Every script's KEYS: the units by ready time (a sorted set), the requests
        #: left, the units' floors, their owners (hashes), the processes seen lately
        #: (a sorted set by when), and the count of units given an owner.
        self.keys = [
            f"{self.key}:{name}"
            for name in ("hosts", "count", "floors", "owners", "processes", "assigned")
        ]
        self._id = uuid.uuid4().hex
        self._seen = int(SEEN * 1_000_000)
        self._list_prefix = f"{self.key}:host:"
        timeout = self.crawler.settings.getfloat("DOWNLOAD_TIMEOUT")
        self._lease = int((timeout + LEASE_MARGIN) * 1_000_000)
        self._scripts = {
            name: server.register_script(script)
            for name, script in (
                ("push", _PUSH),
                ("pop", _POP),
                ("ended", _ENDED),
                ("join", _JOIN),
            )
        }
        self._reported: set[str] = set()  # units without a floor, already said so
        self._waker = EngineWaker(self.crawler)
        # What the last call said: no unit ready before then, and the requests left.
        self._none_before = 0.0
        self._left, self._counted_at = 0, -MAX_WAKE
        # The ends of this process's requests, for its next call: (unit, floor, floor
        # known, when).
        self._ends: list[tuple[str, float, bool, float]] = []
        self._client = _async_client(server)
        self._calls: set[asyncio.Future[None]] = set()  # kept until done
        self._warned = False
        self.politeness.on_finished.append(self._finished)
        self.crawler.signals.connect(self._flush, signal=signals.spider_closed)
        # Seen from the start (scrapy-redis opens its queue as the crawl opens): the
        # units pushed before this process's first pop are shared with it too.
        self._scripts["join"](keys=self.keys, args=["", "", self._id, self._seen])

    def __len__(self) -> int:
        """The requests in the fleet's queue: as the last call saw them, if it was
        less than :data:`MAX_WAKE` ago (Scrapy asks after every request), else asked."""
        now = self.politeness.now()
        if now - self._counted_at > MAX_WAKE:
            self._count(self.server.get(self.keys[1]), now)
        return self._left

    def _count(self, count: Any, now: float) -> None:
        self._left, self._counted_at = int(count or 0), now

    def push(self, request: Request) -> None:
        """Add *request* to its unit's list: through the pipelined asynchronous
        connection when there is one (the command is written at the event loop's
        next turn, not waited for), else with a blocking call."""
        self._left += 1
        unit = self.politeness.unit(request)
        encoded = self.serializer.dumps(request.to_dict(spider=self.spider))
        args = [self._list_prefix, unit, self._id, self._seen, encoded]
        if self._client is not None and _loop_running():
            self._in_background(self._pushed(args))
            return
        self._none_before = 0.0  # its unit may be ready now
        self._scripts["push"](keys=self.keys, args=args)

    async def _pushed(self, args: list[Any]) -> None:
        try:
            await self._evalsha("push", args)
        except Exception as exc:
            self._say_once(f"The shared queue could not push a request without blocking ({exc})")
            self._scripts["push"](keys=self.keys, args=args)  # raises if Redis is gone
        self._none_before = 0.0  # its unit may be ready now

    def _in_background(self, call: Coroutine[Any, Any, None]) -> None:
        future = asyncio.ensure_future(call)
        self._calls.add(future)
        future.add_done_callback(self._background_done)

    def _background_done(self, future: asyncio.Future[None]) -> None:
        self._calls.discard(future)
        if not future.cancelled() and future.exception() is not None:
            logger.error("The shared queue lost a request", exc_info=future.exception())

    async def _evalsha(self, name: str, args: list[Any]) -> None:
        """Run the script *name* through the asynchronous connection."""
        assert self._client is not None
        script, keys = self._scripts[name], self.keys
        try:
            await self._client.call("EVALSHA", script.sha, len(keys), *keys, *args)
        except RedisReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            await self._client.call("EVAL", script.script, len(keys), *keys, *args)

    def _say_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("%s (said once)", message)

    def pop(self, timeout: int = 0) -> Request | None:
        now = self.politeness.now()
        if now < self._none_before and not self._ends:
            # Redis said nothing is ready before then, and nothing changed here.
            self._waker.wake_in(self._none_before - now)
            return None
        # Without the gate no end is seen: a unit is not held for a request's lease.
        lease = self._lease if self.politeness.tracking else 0
        args = [self._list_prefix, lease, self._id, self._seen, int(GRACE * 1_000_000)]
        data, wait, count = self._scripts["pop"](keys=self.keys, args=[*args, *self._told_ends()])
        self._count(count, now)
        if not data:
            # Nothing ready here before then: the engine asks again after every
            # request, which would be a call each.  Nothing queued: another process
            # may push a unit this one owns, which waits GRACE for it.
            seconds = min(int(wait) / 1_000_000, MAX_WAKE) if wait is not None else IDLE_WAKE
            self._none_before = now + seconds
            self._waker.wake_in(seconds)
            return None
        request = request_from_dict(self.serializer.loads(data), spider=self.spider)
        self.politeness.released(request, self.politeness.unit(request))
        return request

    def _finished(self, request: Request, unit: str, reached: bool) -> None:
        """A request this process took is done: the unit is ready again ``floor``
        after it ended (or at once, if the site never saw it)."""
        if not reached:
            self._ended(unit, 0.0, known=False)
            return
        floor = self.politeness.floor(unit)
        if not floor and unit in self._reported:
            return
        if not floor:
            self._reported.add(unit)
        else:
            self._reported.discard(unit)  # a unit that backs off is floored for a while
        self._ended(unit, floor, known=True)

    def _ended(self, unit: str, floor: float, known: bool) -> None:
        """Tell Redis a request of *unit* ended now, without blocking the reactor:
        through a pipelined asynchronous connection to the queue's Redis; or, when
        that client cannot reach it as redis-py does (custom TLS settings), with the
        next pop (the engine asks for a request as soon as one ends)."""
        now = self.politeness.now()
        self._ends.append((unit, floor, known, now))
        # The unit may be ready for this process before Redis said another would be.
        ready = max(now + floor, self.politeness.held_until(unit))
        self._none_before = min(self._none_before, ready)
        if self._client is not None and _loop_running():
            self._in_background(self._tell(self._told_ends()))

    async def _tell(self, ends: list[str | int]) -> None:
        try:
            await self._evalsha("ended", ends)
        except Exception as exc:  # the unit's lease ends its hold all the same
            self._say_once(
                f"The shared queue could not tell Redis a request ended ({exc}): its "
                "unit is held for the request's lease"
            )

    def _told_ends(self) -> list[str | int]:
        """The ends noted since the last call, as the scripts take them (_ENDS)."""
        now = self.politeness.now()
        told: list[str | int] = []
        for unit, floor, known, ended in self._ends:
            ready = max(ended + floor, self.politeness.held_until(unit))
            told += [unit, int(floor * 1_000_000), int(known), int((ready - now) * 1_000_000)]
        self._ends = []
        return told

    async def _flush(self, spider: Any = None) -> None:
        """The crawl closes: wait for the pushes and ends in flight, and tell Redis
        the ends no pop took (the other processes would otherwise wait for this
        one's units until their leases end)."""
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
        if self._ends:
            self._scripts["ended"](keys=self.keys, args=self._told_ends())

    def clear(self) -> None:
        units = self.server.zrange(self.keys[0], 0, -1)
        names = [self._list_prefix + unit.decode() for unit in units]
        self.server.delete(*self.keys, *names)
