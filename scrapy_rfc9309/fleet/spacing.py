"""Request spacing shared by a fleet of crawler processes, in Redis: end to start.

Each floored unit has one key, ``{prefix}:{unit}`` (the unit as its hash tag, one key
per call: a Redis Cluster shards the units), holding when the fleet's last request to
it ended (``end``), until when a process holds it for a request on the wire
(``busy``), and the largest floor any process asked for (``floor``).  Both calls are
atomic functions of the fleet's ledger (:mod:`.script`, where the rule is written)
on the server's clock (``TIME``), so the machines' clocks do not matter:

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

from typing import Any

from .._redis import CLIENT_ERRORS
from ..ledger import Ledger
from . import FleetRedisError, fleet_client, unit_key
from .script import ledger_call

#: The prefix of the units' records: the shared queue's pops acquire the same ones.
PREFIX = "rfc9309:spacing"


class SpacingError(FleetRedisError):
    """Redis could not be reached or refused the call."""


class FleetSpacing(Ledger):
    """``await spacing.acquire("example.com", 1.0, 190, token)`` -> seconds to wait
    before asking again (0: start now, the unit is held for *token* for at most
    190 s); ``await spacing.release("example.com", 1.0, token)`` once that request
    ended."""

    def __init__(self, url: str, prefix: str = PREFIX, timeout: float = 2.0):
        self.prefix = prefix
        self._holds_key = f"{prefix}-holds"
        self._redis = fleet_client(url, timeout)

    async def acquire(self, unit: str, floor: float, lease: float, token: str = "") -> float:
        waited = await self._unit("acquire", unit, *_micros(floor, lease), token)
        return max(int(waited), 0) / 1_000_000

    async def release(self, unit: str, floor: float, token: str = "", reached: bool = True) -> None:
        """The request that acquired *unit* with *token* ended now (without reaching
        the site: *reached* false); a release that comes after the unit went to
        another acquisition (its lease ended) changes nothing."""
        await self._unit("release", unit, *_micros(floor), token, int(reached))

    async def hold(self, unit: str, seconds: float) -> None:
        """No process starts a request to *unit* for *seconds* (it asked to slow
        down), and the others find it in :meth:`holds`."""
        await self._unit("hold", unit, *_micros(seconds))
        await self._call("announce", self._holds_key, unit, *_micros(seconds))

    async def holds(self) -> list[tuple[str, float]]:
        """The units held now, each with the seconds left."""
        reply = await self._call("holds", self._holds_key)
        return [
            (unit.decode(), int(left) / 1_000_000)
            for unit, left in zip(reply[::2], reply[1::2], strict=True)
        ]

    async def _unit(self, function: str, unit: str, *args: str | int) -> int:
        return int(await self._call(function, unit_key(self.prefix, unit), *args))

    async def _call(self, function: str, key: str, *args: bytes | str | int) -> Any:
        try:
            return await ledger_call(self._redis, function, [key], *args)
        except CLIENT_ERRORS as exc:  # anything else is a bug, raised as one
            raise SpacingError(str(exc)) from exc

    def close(self) -> None:
        self._redis.close()


def _micros(*seconds: float) -> list[int]:
    return [int(value * 1_000_000) for value in seconds]
