"""Request spacing shared by a fleet of crawler processes, in Redis.

Each floored host has one key, ``{prefix}:{host}`` (one key per call: safe for Redis
Cluster), holding the earliest time the fleet's next request may start and the
largest floor any process asked for.  Reserving a start is one atomic script on the
server's clock (``TIME``), so the machines' clocks do not matter:

    start = max(now, next); next = start + floor

and the caller waits ``start - now``.  Keys expire after ten idle minutes (a lowered
floor is forgotten then).  Pure asyncio: no Scrapy, no Twisted.
"""

from __future__ import annotations

import hashlib

from ..budget.resp import RedisReplyError
from . import fleet_client

#: KEYS[1] = the host's key; ARGV[1] = the floor in microseconds.
#: Returns the microseconds to wait before starting.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stored = redis.call('HMGET', KEYS[1], 'next', 'floor')
local floor = math.max(tonumber(ARGV[1]), tonumber(stored[2]) or 0)
local start = math.max(now, tonumber(stored[1]) or 0)
redis.call('HSET', KEYS[1], 'next', start + floor, 'floor', floor)
redis.call('PEXPIRE', KEYS[1], math.floor(floor / 1000) + 600000)
return start - now
"""
_SHA = hashlib.sha1(_RESERVE.encode()).hexdigest()

#: Idle keys live this long (milliseconds, on top of their floor).
IDLE_EXPIRY_MS = 600_000


class SpacingError(Exception):
    """Redis could not be reached or refused the call."""


class FleetSpacing:
    """``await spacing.reserve("example.com", 1.0)`` -> seconds to wait before the
    request to that host may start, for the whole fleet sharing *url*'s Redis."""

    def __init__(self, url: str, prefix: str = "rfc9309:spacing", timeout: float = 2.0):
        self.prefix = prefix
        self._redis = fleet_client(url, timeout)

    async def reserve(self, host: str, floor: float) -> float:
        key = f"{self.prefix}:{host}"
        micros = int(floor * 1_000_000)
        try:
            try:
                waited = await self._redis.call("EVALSHA", _SHA, 1, key, micros)
            except RedisReplyError as exc:
                if not str(exc).startswith("NOSCRIPT"):
                    raise
                waited = await self._redis.call("EVAL", _RESERVE, 1, key, micros)
        except Exception as exc:
            raise SpacingError(str(exc)) from exc
        return max(int(waited), 0) / 1_000_000

    def close(self) -> None:
        self._redis.close()
