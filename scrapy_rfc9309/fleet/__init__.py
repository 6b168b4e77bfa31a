"""Politeness shared by a fleet of crawler processes through one Redis (pure asyncio)."""

from __future__ import annotations

from .._redis import PipelinedRedis, address_from_url


def fleet_client(url: str, timeout: float) -> PipelinedRedis:
    """A pipelined client for the fleet's Redis at *url*; ``ValueError`` if the URL is
    not one it can use (``redis://``, ``rediss://``, ``unix://``, no query options)."""
    address = address_from_url(url, timeout)
    if address is None:
        raise ValueError(f"unsupported Redis URL for the fleet: {url!r}")
    return PipelinedRedis(address)
