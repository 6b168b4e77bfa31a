"""Budget counters in Redis."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlsplit

from ..._redis import PipelinedRedis, address_from_url, redacted_url, redis_errors
from ._base import KEEP_DAYS, BudgetStorage, Reservation, StorageError, Usage

logger = logging.getLogger(__name__)


class RedisStorage(BudgetStorage):
    """Counters in Redis, for many processes or machines sharing one budget.

    One hash per (day, domain), ``domainbudget:{day}:{domain}`` with fields ``r`` and
    ``p``: every script touches a single key, as Redis Cluster requires (the storage
    talks to one server: a cluster is reached through a cluster-aware proxy).  A
    reservation is one Lua script (one round trip).  Keys expire after ``ttl_days``
    (:data:`KEEP_DAYS`): :meth:`forget_before` has nothing to do.

    The plain methods use redis-py.  The ``*_async`` methods use
    :class:`~scrapy_rfc9309._redis.PipelinedRedis`, one pipelined connection
    bound to the event loop that first uses it; when the URL carries options that
    client does not know (anything but host, port, db, user, password, TLS with the
    default certificate checks, a Unix socket and timeouts), they run the redis-py
    calls in a worker thread instead.
    """

    _RESERVE = """
    local requests = tonumber(redis.call('HGET', KEYS[1], 'r') or '0')
    local pages = tonumber(redis.call('HGET', KEYS[1], 'p') or '0')
    local max_requests, max_pages = tonumber(ARGV[1]), tonumber(ARGV[2])
    if max_requests > 0 and requests >= max_requests then return 1 end
    if max_pages > 0 and pages >= max_pages then return 2 end
    redis.call('HINCRBY', KEYS[1], 'r', 1)
    redis.call('HINCRBY', KEYS[1], 'p', 1)
    redis.call('EXPIRE', KEYS[1], ARGV[3])
    return 0
    """
    _COUNT_REQUEST = """
    redis.call('HINCRBY', KEYS[1], 'r', 1)
    redis.call('EXPIRE', KEYS[1], ARGV[1])
    return 0
    """
    _RELEASE = """
    if tonumber(redis.call('HGET', KEYS[1], 'p') or '0') > 0 then
      redis.call('HINCRBY', KEYS[1], 'p', -1)
    end
    return 0
    """
    _RESULTS = (Reservation.GRANTED, Reservation.REQUESTS_EXHAUSTED, Reservation.PAGES_EXHAUSTED)

    @classmethod
    def from_settings(cls, settings: Any) -> RedisStorage:
        return cls(settings.get("DOMAINBUDGET_REDIS_URL"))

    def __init__(
        self,
        url: str,
        prefix: str = "domainbudget",
        ttl_days: int = KEEP_DAYS,
        timeout: float = 5.0,
    ):
        try:
            import redis
        except ImportError as exc:
            raise StorageError(
                "RedisStorage needs the redis package: pip install 'scrapy-rfc9309[redis]'"
            ) from exc
        self._errors = redis_errors()
        self.prefix = prefix
        self.ttl = ttl_days * 86400
        try:
            self.client = redis.Redis.from_url(
                url, socket_timeout=timeout, socket_connect_timeout=timeout
            )
        except ValueError as exc:
            raise StorageError(f"Redis budget storage: bad URL {redacted_url(url)}: {exc}") from exc
        self._scripts = {
            source: self.client.register_script(source)
            for source in (self._RESERVE, self._COUNT_REQUEST, self._RELEASE)
        }
        address = address_from_url(url, timeout)
        self._pipe = PipelinedRedis(address) if address else None
        if address is None:
            logger.warning(
                "DOMAINBUDGET_REDIS_URL has options the pipelined Redis client does not "
                "handle (%s): budget reservations go through redis-py in a worker thread, "
                "several times slower",
                urlsplit(url).query or urlsplit(url).scheme,
            )

    @property
    def pipelined(self) -> bool:
        """Whether reservations go through the package's pipelined client (else
        through redis-py in a worker thread: the URL has options it cannot apply)."""
        return self._pipe is not None

    def _key(self, day: str, key: str) -> str:
        return f"{self.prefix}:{day}:{key}"

    def _run(self, source: str, day: str, key: str, *args: Any) -> int:
        try:
            return int(self._scripts[source](keys=[self._key(day, key)], args=args))
        except self._errors as exc:
            raise StorageError(f"Redis budget storage: {exc}") from exc

    async def _run_async(self, source: str, day: str, key: str, *args: Any) -> int:
        if self._pipe is None:
            return await asyncio.to_thread(self._run, source, day, key, *args)
        sha, keys = self._scripts[source].sha, [self._key(day, key)]
        try:
            return int(await self._pipe.run_script(source, sha, keys, *args))
        except self._errors as exc:
            raise StorageError(f"Redis budget storage: {exc}") from exc

    def reserve(self, key: str, day: str, max_requests: int, max_pages: int) -> Reservation:
        return self._RESULTS[self._run(self._RESERVE, day, key, max_requests, max_pages, self.ttl)]

    def count_request(self, key: str, day: str) -> None:
        self._run(self._COUNT_REQUEST, day, key, self.ttl)

    def release_page(self, key: str, day: str) -> None:
        self._run(self._RELEASE, day, key)

    async def reserve_async(
        self, key: str, day: str, max_requests: int, max_pages: int
    ) -> Reservation:
        result = await self._run_async(self._RESERVE, day, key, max_requests, max_pages, self.ttl)
        return self._RESULTS[result]

    async def count_request_async(self, key: str, day: str) -> None:
        await self._run_async(self._COUNT_REQUEST, day, key, self.ttl)

    async def release_page_async(self, key: str, day: str) -> None:
        await self._run_async(self._RELEASE, day, key)

    def counts(self, key: str, day: str) -> tuple[int, int]:
        try:
            requests, pages = self.client.hmget(self._key(day, key), "r", "p")
        except self._errors as exc:
            raise StorageError(f"Redis budget storage: {exc}") from exc
        return int(requests or 0), int(pages or 0)

    async def counts_async(self, key: str, day: str) -> tuple[int, int]:
        if self._pipe is None:
            return await asyncio.to_thread(self.counts, key, day)
        try:
            requests, pages = await self._pipe.call("HMGET", self._key(day, key), "r", "p")
        except self._errors as exc:
            raise StorageError(f"Redis budget storage: {exc}") from exc
        return int(requests or 0), int(pages or 0)

    def usage(self, day: str) -> Usage:
        prefix = self._key(day, "")
        try:
            result = {}
            for name in self.client.scan_iter(match=prefix + "*", count=1000):
                counts = self.client.hgetall(name)
                domain = name.decode()[len(prefix) :]
                result[domain] = (int(counts.get(b"r", 0)), int(counts.get(b"p", 0)))
        except self._errors as exc:
            raise StorageError(f"Redis budget storage: {exc}") from exc
        return dict(sorted(result.items()))

    def reset(self, key: str, day: str) -> None:
        try:
            self.client.delete(self._key(day, key))
        except self._errors as exc:
            raise StorageError(f"Redis budget storage: {exc}") from exc

    def close(self) -> None:
        self.client.close()
        if self._pipe is not None:
            self._pipe.close()

    async def close_async(self) -> None:
        self.close()  # closing sockets does not block
