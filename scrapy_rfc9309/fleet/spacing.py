"""Request spacing shared by a fleet of crawler processes, in Redis: end to start.

Each floored unit has one key, ``{prefix}:{unit}`` (the unit as its hash tag, one key
per call: a Redis Cluster shards the units), holding when the fleet's last request to
it ended (``end``), until when a process holds it for a request on the wire
(``busy``), and the largest floor any process asked for (``floor``).  Both calls are
atomic scripts on the server's clock (``TIME``), so the machines' clocks do not
matter:

* ``acquire``: if nobody holds the unit and ``floor`` has passed since ``end``, hold
  it for at most ``lease`` seconds and answer 0 (start now); else answer how long to
  wait before asking again;
* ``release``: the request ended now (``end = now``), nobody holds the unit.

So the fleet's next request to a unit starts no earlier than ``floor`` after the
previous one ended, whichever process sent either.  A unit that asked to slow down
is held (``hold``): ``acquire`` answers "wait" until then, and the unit is listed in
``{prefix}-holds``, a sorted set by the end of each hold, which every process reads
(:meth:`FleetSpacing.holds`) to hold the unit too.  A process killed mid-request
holds its units until their lease runs out.  Keys expire after ten idle minutes (a
lowered floor is forgotten then).  Pure asyncio: no Scrapy, no Twisted.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .._redis import RedisReplyError
from . import fleet_client, unit_key

_NOW = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
# Numbers are written with %.0f: Lua's own tostring keeps 14 digits, not a microsecond.
_STORE = """
redis.call('HSET', KEYS[1], 'busy', string.format('%.0f', busy), 'end',
  string.format('%.0f', last_end), 'floor', string.format('%.0f', floor))
redis.call('PEXPIRE', KEYS[1], math.floor((math.max(busy, hold) - now + floor) / 1000) + 600000)
"""
_LOAD = """
local stored = redis.call('HMGET', KEYS[1], 'busy', 'end', 'floor', 'hold')
local floor = math.max(tonumber(ARGV[1]), tonumber(stored[3]) or 0)
local busy = tonumber(stored[1]) or 0
local last_end = tonumber(stored[2]) or 0
local hold = tonumber(stored[4]) or 0
"""
#: KEYS[1] = the unit's key; ARGV = floor, lease, poll (microseconds), the token of
#: this acquisition.  Returns the microseconds to wait before asking again, 0 to start
#: now (the unit is then held for the token).
_ACQUIRE = (
    _NOW
    + _LOAD
    + """
if now < hold then return hold - now end
if now < busy then return math.max(math.min(busy - now, tonumber(ARGV[3]), floor), 1000) end
if now < last_end + floor then return last_end + floor - now end
busy = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[4])
"""
    + _STORE
    + "return 0\n"
)
#: KEYS[1] = the unit's key; ARGV = floor (microseconds), the token of the acquisition
#: that ended ('': whichever).  A token the unit is no longer held for (its lease
#: ended and another acquisition took the unit: a release that came late) changes
#: nothing, and 0 is returned.
_RELEASE = (
    _NOW
    + _LOAD
    + """
local owner = redis.call('HGET', KEYS[1], 'owner')
if ARGV[2] ~= '' and owner and owner ~= ARGV[2] then return 0 end
busy = now
last_end = now
"""
    + _STORE
    + "return 1\n"
)
#: KEYS[1] = the unit's key; ARGV = floor (0), the hold (microseconds from now).
_HOLD = (
    _NOW
    + _LOAD
    + """
hold = math.max(hold, now + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'hold', string.format('%.0f', hold))
"""
    + _STORE
    + "return 1\n"
)
#: KEYS[1] = the holds' sorted set; ARGV = unit, the hold (microseconds from now).
_ANNOUNCE = (
    _NOW
    + """
local ending = now + tonumber(ARGV[2])
local known = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if ending > known then redis.call('ZADD', KEYS[1], string.format('%.0f', ending), ARGV[1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
return 1
"""
)
#: KEYS[1] = the holds' sorted set.  Returns {unit, microseconds left, ...}.
_HOLDS = (
    _NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
local held = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 2, #held, 2 do held[i] = string.format('%.0f', tonumber(held[i]) - now) end
return held
"""
)

#: While another process holds a unit, ask again at least this often (seconds), so
#: that a unit with no floor yet (its robots.txt on the wire) is not polled endlessly.
POLL_MIN = 0.05


class SpacingError(Exception):
    """Redis could not be reached or refused the call."""


class FleetSpacing:
    """``await spacing.acquire("example.com", 1.0, 190, token)`` -> seconds to wait
    before asking again (0: start now, the unit is held for *token* for at most
    190 s); ``await spacing.release("example.com", 1.0, token)`` once that request
    ended."""

    def __init__(self, url: str, prefix: str = "rfc9309:spacing", timeout: float = 2.0):
        self.prefix = prefix
        self._holds_key = f"{prefix}-holds"
        self._redis = fleet_client(url, timeout)

    async def acquire(self, unit: str, floor: float, lease: float, token: str = "") -> float:
        poll = max(floor, POLL_MIN)
        waited = await self._eval(_ACQUIRE, unit, (floor, lease, poll), token)
        return max(int(waited), 0) / 1_000_000

    async def release(self, unit: str, floor: float, token: str = "") -> None:
        """The request that acquired *unit* with *token* ended now; a release that
        comes after the unit went to another acquisition (its lease ended) changes
        nothing."""
        await self._eval(_RELEASE, unit, (floor,), token)

    async def hold(self, unit: str, seconds: float) -> None:
        """No process starts a request to *unit* for *seconds* (it asked to slow
        down), and the others find it in :meth:`holds`."""
        await self._eval(_HOLD, unit, (0.0, seconds))
        micros = int(seconds * 1_000_000)
        await self._call(_ANNOUNCE, self._holds_key, unit, micros)

    async def holds(self) -> list[tuple[str, float]]:
        """The units held now, each with the seconds left."""
        reply = await self._call(_HOLDS, self._holds_key)
        return [
            (unit.decode(), int(left) / 1_000_000)
            for unit, left in zip(reply[::2], reply[1::2], strict=True)
        ]

    async def _eval(self, script: str, unit: str, seconds: tuple[float, ...], *words: str) -> int:
        args = [int(value * 1_000_000) for value in seconds]
        return int(await self._call(script, unit_key(self.prefix, unit), *args, *words))

    async def _call(self, script: str, key: str, *args: bytes | str | int) -> Any:
        sha = _SHAS[script]
        try:
            try:
                return await self._redis.call("EVALSHA", sha, 1, key, *args)
            except RedisReplyError as exc:
                if not str(exc).startswith("NOSCRIPT"):
                    raise
                return await self._redis.call("EVAL", script, 1, key, *args)
        except Exception as exc:
            raise SpacingError(str(exc)) from exc

    def close(self) -> None:
        self._redis.close()


_SHAS = {
    script: hashlib.sha1(script.encode()).hexdigest()
    for script in (_ACQUIRE, _RELEASE, _HOLD, _ANNOUNCE, _HOLDS)
}
