"""robots.txt shared by a fleet of crawler processes, in Redis: one fetch per authority
per cache lifetime for the whole fleet.

Keys (tagged with the authority's host, see :func:`~scrapy_rfc9309.fleet.authority_key`:
a call's keys are on one Redis Cluster shard):

* ``{prefix}:{host}:{authority}``: the outcome of the last fetch, as JSON (``outcome``,
  ``status``, and for a 2xx the body as read, at most ``RFC9309_MAX_BYTES``), expiring
  when the fetching process's cache entry does;
* ``{prefix}:lock:{host}:{authority}``: held by the process fetching it, with an expiry, so
  that a process killed mid-fetch blocks the others no longer than that.

Pure asyncio: no Scrapy, no Twisted.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._redis import CLIENT_ERRORS
from . import FleetRedisError, authority_key, fleet_client
from .script import ledger_call


class SharedRobotsError(FleetRedisError):
    """Redis could not be reached or refused the call."""


@dataclass(frozen=True)
class SharedFetch:
    """A fetch result as the fleet shares it; ``ttl`` is what is left of its lifetime."""

    outcome: str
    status: int | None
    body: bytes | None
    ttl: float
    #: Why a fetch ended without a status (a failed redirect), in words.
    reason: str | None = None

    def encode(self) -> str:
        body = base64.b64encode(self.body).decode() if self.body is not None else None
        record = {"outcome": self.outcome, "status": self.status, "body": body}
        if self.reason is not None:
            record["reason"] = self.reason
        return json.dumps(record)

    @classmethod
    def decode(cls, data: bytes, ttl: float) -> SharedFetch:
        record = json.loads(data)
        body = base64.b64decode(record["body"]) if record["body"] is not None else None
        return cls(record["outcome"], record["status"], body, ttl, record.get("reason"))


class SharedRobots:
    """The fleet's robots.txt results in the Redis at *url*."""

    def __init__(self, url: str, prefix: str = "rfc9309:robots", timeout: float = 2.0):
        self.prefix = prefix
        self._redis = fleet_client(url, timeout)

    async def read_or_lock(
        self,
        authority: str,
        seconds: float,
        other_key: str | None = None,
        token: str | None = None,
    ) -> tuple[SharedFetch | None, bytes | None, str | None]:
        """The fleet's current result for *authority*, if any, the value of
        *other_key* (a key tagged with the same host: on the same shard), and when
        the fleet has no result, the lock (held with *token*, a new one if not
        given, for at most *seconds*: a process killed mid-fetch holds it no longer)
        if it is free, all in one round trip: ``(result, other_key's value, token
        or None)``.  Atomic: no process can publish between the read and the lock.
        A caller whose call failed may hold the lock all the same (Redis ran it,
        its answer was lost): :meth:`release` with *token* lets go of it."""
        token = token or secrets.token_hex(8)
        keys = [
            authority_key(self.prefix, authority),
            authority_key(f"{self.prefix}:lock", authority),
            *([other_key] if other_key else []),
        ]
        lock_ms = max(int(seconds * 1000), 1)
        data, ttl_ms, other, locked = await self._call("read_or_lock", keys, token, lock_ms)
        return _decoded(data, ttl_ms), other, token if int(locked) else None

    async def release(self, authority: str, token: str) -> None:
        """Give up the lock taken with *token* without publishing."""
        key = authority_key(f"{self.prefix}:lock", authority)
        await self._call("unlock", [key], token)

    async def publish(self, authority: str, fetch: SharedFetch, token: str) -> None:
        """Share *fetch* for its ``ttl`` and release the lock taken with *token*."""
        # One hash tag, the host: both keys on one shard of a Redis Cluster.
        keys = [
            authority_key(self.prefix, authority),
            authority_key(f"{self.prefix}:lock", authority),
        ]
        ttl_ms = max(int(fetch.ttl * 1000), 1)
        await self._call("publish", keys, fetch.encode(), ttl_ms, token)

    async def _call(self, function: str, keys: Sequence[str], *args: str | int) -> Any:
        """Run the fleet ledger's *function* (see :mod:`.script`)."""
        try:
            return await ledger_call(self._redis, function, keys, *args)
        except CLIENT_ERRORS as exc:  # anything else is a bug, raised as one
            raise SharedRobotsError(str(exc)) from exc

    def close(self) -> None:
        self._redis.close()


def _decoded(data: bytes | None, ttl_ms: int) -> SharedFetch | None:
    if data is None or int(ttl_ms) <= 0:
        return None
    return SharedFetch.decode(data, int(ttl_ms) / 1000)
