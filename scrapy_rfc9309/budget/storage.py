"""Budget counters: one small interface, three backends (memory, SQLite, Redis).

Counters are kept per (day, domain key): ``requests`` sent and ``pages`` reserved.
A reservation is atomic: it checks both limits and adds one to both counters, or
changes nothing, so concurrent crawlers can never overshoot a limit.  Every
backend passes the same contract tests (``tests/budget/test_storage_contract.py``).

The plain methods may block (on a file lock or the network).  The ``*_async``
methods of the hot path (reserve, count a request, release a page) never block the
event loop they run on: the memory storage answers at once, the SQLite storage
tries its statement without waiting for a lock and hands it to a worker thread only
when another writer holds the file, the Redis storage uses a pipelined asyncio
connection, and any other storage falls back to a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .resp import PipelinedRedis, RedisConnectionError, RedisReplyError, address_from_url

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


class StorageError(Exception):
    """The storage failed (I/O, lock timeout, network); wraps the backend's error."""


class Reservation(str, Enum):
    GRANTED = "granted"
    REQUESTS_EXHAUSTED = "max_requests_per_day"
    PAGES_EXHAUSTED = "max_pages_per_day"


Usage = dict[str, tuple[int, int]]  # domain key -> (requests, pages)


class BudgetStorage(ABC):
    @classmethod
    def from_settings(cls, settings: Any) -> BudgetStorage:
        """Build from settings (anything with ``get(name)``); backends with options override."""
        return cls()

    @abstractmethod
    def reserve(self, key: str, day: str, max_requests: int, max_pages: int) -> Reservation:
        """Atomically: if ``requests < max_requests`` and ``pages < max_pages``
        (a limit of 0 is unlimited), add one to both and grant; otherwise change nothing."""

    @abstractmethod
    def count_request(self, key: str, day: str) -> None:
        """Add one request, never refused (robots.txt fetches)."""

    @abstractmethod
    def release_page(self, key: str, day: str) -> None:
        """Give back one page reservation (the response was not a page)."""

    @abstractmethod
    def usage(self, day: str) -> Usage:
        """Every domain key's counters for *day*."""

    @abstractmethod
    def reset(self, key: str, day: str) -> None:
        """Forget *key*'s counters for *day*."""

    def close(self) -> None:  # noqa: B027 (optional for backends)
        """Release connections."""

    # -- the hot path, for an event loop (override to avoid the thread hop) --

    async def reserve_async(
        self, key: str, day: str, max_requests: int, max_pages: int
    ) -> Reservation:
        return await asyncio.to_thread(self.reserve, key, day, max_requests, max_pages)

    async def count_request_async(self, key: str, day: str) -> None:
        await asyncio.to_thread(self.count_request, key, day)

    async def release_page_async(self, key: str, day: str) -> None:
        await asyncio.to_thread(self.release_page, key, day)

    async def close_async(self) -> None:
        await asyncio.to_thread(self.close)


def _reservation_for(requests: int, pages: int, max_requests: int, max_pages: int) -> Reservation:
    """Whether one more request (and page) fits under the limits, given the counts."""
    if max_requests and requests >= max_requests:
        return Reservation.REQUESTS_EXHAUSTED
    if max_pages and pages >= max_pages:
        return Reservation.PAGES_EXHAUSTED
    return Reservation.GRANTED


class MemoryStorage(BudgetStorage):
    """Counters in this process only: for tests and one-off runs."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], list[int]] = {}
        self._lock = threading.Lock()

    def reserve(self, key: str, day: str, max_requests: int, max_pages: int) -> Reservation:
        with self._lock:
            counts = self._counts.setdefault((day, key), [0, 0])
            reservation = _reservation_for(counts[0], counts[1], max_requests, max_pages)
            if reservation is Reservation.GRANTED:
                counts[0] += 1
                counts[1] += 1
            return reservation

    def count_request(self, key: str, day: str) -> None:
        with self._lock:
            self._counts.setdefault((day, key), [0, 0])[0] += 1

    def release_page(self, key: str, day: str) -> None:
        with self._lock:
            counts = self._counts.get((day, key))
            if counts and counts[1] > 0:
                counts[1] -= 1

    def usage(self, day: str) -> Usage:
        with self._lock:
            return {key: (c[0], c[1]) for (d, key), c in self._counts.items() if d == day}

    def reset(self, key: str, day: str) -> None:
        with self._lock:
            self._counts.pop((day, key), None)

    # The lock is only ever held for a few dictionary operations: answer at once.
    async def reserve_async(
        self, key: str, day: str, max_requests: int, max_pages: int
    ) -> Reservation:
        return self.reserve(key, day, max_requests, max_pages)

    async def count_request_async(self, key: str, day: str) -> None:
        self.count_request(key, day)

    async def release_page_async(self, key: str, day: str) -> None:
        self.release_page(key, day)


class _Busy(Exception):
    """The no-wait SQLite connection found the file locked by another writer."""


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
    return "locked" in str(exc)


class SQLiteStorage(BudgetStorage):
    """Counters in an SQLite file (WAL): survives restarts, shared by the processes of
    one machine.  Each reservation is one atomic upsert statement.

    The ``*_async`` methods run their statement on the calling thread through a
    connection that never waits: its busy timeout is 0, and it never checkpoints (in
    WAL mode with ``synchronous=NORMAL`` a commit is a write into the OS page cache;
    only checkpoints fsync, and they run in a worker thread every CHECKPOINT_EVERY
    writes).  When another writer holds the lock, the statement goes to a worker
    thread that waits up to *timeout* seconds.
    """

    CHECKPOINT_EVERY = 1000

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS budget ("
        " day TEXT NOT NULL, domain TEXT NOT NULL,"
        " requests INTEGER NOT NULL DEFAULT 0, pages INTEGER NOT NULL DEFAULT 0,"
        " PRIMARY KEY (day, domain))"
    )
    _RESERVE = (
        "INSERT INTO budget (day, domain, requests, pages) VALUES (:day, :key, 1, 1)"
        " ON CONFLICT (day, domain) DO UPDATE SET requests = requests + 1, pages = pages + 1"
        " WHERE (:max_requests = 0 OR requests < :max_requests)"
        " AND (:max_pages = 0 OR pages < :max_pages)"
    )
    _COUNT_REQUEST = (
        "INSERT INTO budget (day, domain, requests) VALUES (?, ?, 1)"
        " ON CONFLICT (day, domain) DO UPDATE SET requests = requests + 1"
    )
    _RELEASE_PAGE = "UPDATE budget SET pages = pages - 1 WHERE day = ? AND domain = ? AND pages > 0"

    @classmethod
    def from_settings(cls, settings: Any) -> SQLiteStorage:
        return cls(settings.get("DOMAINBUDGET_SQLITE_PATH"))

    def __init__(self, path: str | Path, timeout: float = 5.0) -> None:
        self.path = Path(path).absolute()  # a later chdir must not move the budget
        self.timeout = timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._nowait: sqlite3.Connection | None = None
        self._nowait_writes = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = self._connection()
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(self._SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"SQLite budget storage {self.path}: {exc}") from exc

    def _connect(self, timeout: float) -> sqlite3.Connection:
        # Autocommit (isolation_level=None): each statement is its own transaction.
        connection = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        # In WAL mode NORMAL survives a crashed or killed process (only a power
        # loss can lose the last commits) and is ~6x faster than FULL.
        connection.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._connections.append(connection)
        return connection

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections are per thread); it waits for locks."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._connect(self.timeout)
        return connection

    def _nowait_connection(self) -> sqlite3.Connection:
        """The event loop's connection: it never waits for a lock, never checkpoints."""
        if self._nowait is None:
            try:
                self._nowait = self._connect(timeout=0)
                self._nowait.execute("PRAGMA wal_autocheckpoint=0")
            except sqlite3.Error as exc:
                raise StorageError(f"SQLite budget storage {self.path}: {exc}") from exc
        return self._nowait

    def _execute(
        self,
        connection: sqlite3.Connection,
        sql: str,
        params: dict[str, Any] | tuple[Any, ...] = (),
    ) -> sqlite3.Cursor:
        try:
            return connection.execute(sql, params)
        except sqlite3.Error as exc:
            if connection is self._nowait and _is_busy(exc):
                raise _Busy from exc
            raise StorageError(f"SQLite budget storage {self.path}: {exc}") from exc

    def _reserve(
        self, connection: sqlite3.Connection, key: str, day: str, max_requests: int, max_pages: int
    ) -> Reservation:
        params = {"day": day, "key": key, "max_requests": max_requests, "max_pages": max_pages}
        if self._execute(connection, self._RESERVE, params).rowcount == 1:
            return Reservation.GRANTED
        row = self._execute(
            connection,
            "SELECT requests, pages FROM budget WHERE day = ? AND domain = ?",
            (day, key),
        ).fetchone()
        refused = _reservation_for(row[0], row[1], max_requests, max_pages) if row else None
        return (
            refused
            if refused not in (None, Reservation.GRANTED)
            else Reservation.REQUESTS_EXHAUSTED
        )

    def reserve(self, key: str, day: str, max_requests: int, max_pages: int) -> Reservation:
        return self._reserve(self._connection(), key, day, max_requests, max_pages)

    def count_request(self, key: str, day: str) -> None:
        self._execute(self._connection(), self._COUNT_REQUEST, (day, key))

    def release_page(self, key: str, day: str) -> None:
        self._execute(self._connection(), self._RELEASE_PAGE, (day, key))

    def usage(self, day: str) -> Usage:
        rows = self._execute(
            self._connection(),
            "SELECT domain, requests, pages FROM budget WHERE day = ? ORDER BY domain",
            (day,),
        ).fetchall()
        return {domain: (requests, pages) for domain, requests, pages in rows}

    def reset(self, key: str, day: str) -> None:
        self._execute(
            self._connection(), "DELETE FROM budget WHERE day = ? AND domain = ?", (day, key)
        )

    async def reserve_async(
        self, key: str, day: str, max_requests: int, max_pages: int
    ) -> Reservation:
        return await self._without_waiting(self._reserve, key, day, max_requests, max_pages)

    async def count_request_async(self, key: str, day: str) -> None:
        await self._without_waiting(self._execute, self._COUNT_REQUEST, (day, key))

    async def release_page_async(self, key: str, day: str) -> None:
        await self._without_waiting(self._execute, self._RELEASE_PAGE, (day, key))

    async def _without_waiting(self, statement: Callable[..., _T], *args: Any) -> _T:
        """``statement(connection, *args)`` on the no-wait connection; in a worker
        thread, on a waiting connection, when the file is locked (nothing was written)."""
        try:
            result = statement(self._nowait_connection(), *args)
        except _Busy:
            return await asyncio.to_thread(lambda: statement(self._connection(), *args))
        self._nowait_writes += 1
        if self._nowait_writes % self.CHECKPOINT_EVERY == 0:
            asyncio.get_running_loop().run_in_executor(None, self._checkpoint)
        return result

    def _checkpoint(self) -> None:
        # A failed checkpoint is harmless: the WAL grows a little until the next one.
        with contextlib.suppress(sqlite3.Error):
            self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()
        self._nowait = None


class RedisStorage(BudgetStorage):
    """Counters in Redis, for many processes or machines sharing one budget.

    One hash per (day, domain), ``domainbudget:{day}:{domain}`` with fields ``r`` and
    ``p``: every script touches a single key, as Redis Cluster requires (the storage
    talks to one server: a cluster is reached through a cluster-aware proxy).  A
    reservation is one Lua script (one round trip).  Keys expire after ``ttl_days``.

    The plain methods use redis-py.  The ``*_async`` methods use
    :class:`~scrapy_rfc9309.budget.resp.PipelinedRedis`, one pipelined connection
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
        self, url: str, prefix: str = "domainbudget", ttl_days: int = 3, timeout: float = 5.0
    ):
        try:
            import redis
        except ImportError as exc:
            raise StorageError(
                "RedisStorage needs the redis package: pip install 'scrapy-rfc9309[redis]'"
            ) from exc
        self._errors: tuple[type[BaseException], ...] = (
            redis.RedisError,
            OSError,
            RedisConnectionError,
            RedisReplyError,
        )
        self.prefix = prefix
        self.ttl = ttl_days * 86400
        try:
            self.client = redis.Redis.from_url(
                url, socket_timeout=timeout, socket_connect_timeout=timeout
            )
        except ValueError as exc:
            raise StorageError(f"Redis budget storage: bad URL {url!r}: {exc}") from exc
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
        script_args = (1, self._key(day, key), *args)
        try:
            try:
                reply = await self._pipe.call("EVALSHA", self._scripts[source].sha, *script_args)
            except RedisReplyError as exc:
                if not str(exc).startswith("NOSCRIPT"):
                    raise
                reply = await self._pipe.call("EVAL", source, *script_args)  # loads it
            return int(reply)
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
