"""Politeness shared by a fleet of crawler processes through one Redis (pure asyncio)."""

from __future__ import annotations

from urllib.parse import urlsplit

from .._redis import PipelinedRedis, address_from_url, unknown_options


class FleetRedisError(Exception):
    """The fleet's Redis could not be reached or refused the call."""


def unit_key(prefix: str, unit: str) -> str:
    """The key of politeness unit *unit* under *prefix*: ``prefix:{unit}``.  The
    braces make the unit the key's hash tag: a Redis Cluster keeps every key of one
    unit on one shard, and spreads the units over the shards."""
    return f"{prefix}:{{{unit}}}"


def authority_key(prefix: str, authority: str) -> str:
    """The key of *authority*'s robots.txt under *prefix*, tagged with its host (see
    :func:`unit_key`): ``prefix:{host}:scheme://host:port``."""
    return f"{unit_key(prefix, urlsplit(authority).hostname or '')}:{authority}"


def fleet_client(url: str, timeout: float) -> PipelinedRedis:
    """A pipelined client for the fleet's Redis at *url*; ``ValueError`` if the URL is
    not one it can use (``redis://``, ``rediss://``, ``unix://``; see
    :func:`scrapy_rfc9309._redis.address_from_url` for its options)."""
    address = address_from_url(url, timeout)
    if address is None:
        what = ", ".join(unknown_options(url)) or f"scheme {urlsplit(url).scheme!r}"
        raise ValueError(f"unsupported Redis URL for the fleet ({what})")
    return PipelinedRedis(address)
