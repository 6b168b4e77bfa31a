"""Budget counters in an SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ._base import BudgetStorage, Reservation, StorageError, Usage, reservation_for

_T = TypeVar("_T")


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
        self._checkpointing: asyncio.Future[None] | None = None
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
        row = self._counts(connection, key, day)
        refused = reservation_for(row[0], row[1], max_requests, max_pages) if row else None
        return (
            refused
            if refused not in (None, Reservation.GRANTED)
            else Reservation.REQUESTS_EXHAUSTED
        )

    def _counts(self, connection: sqlite3.Connection, key: str, day: str) -> tuple[int, int] | None:
        row = self._execute(
            connection,
            "SELECT requests, pages FROM budget WHERE day = ? AND domain = ?",
            (day, key),
        ).fetchone()
        return (row[0], row[1]) if row else None

    def reserve(self, key: str, day: str, max_requests: int, max_pages: int) -> Reservation:
        return self._reserve(self._connection(), key, day, max_requests, max_pages)

    def counts(self, key: str, day: str) -> tuple[int, int]:
        return self._counts(self._connection(), key, day) or (0, 0)

    async def counts_async(self, key: str, day: str) -> tuple[int, int]:
        return await self._without_waiting(self._counts, key, day) or (0, 0)

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

    def forget_before(self, day: str) -> None:
        """Delete the days before *day*, a thousand rows to a transaction: another
        process's writes wait for one of them at most, not for the whole deletion."""
        delete = (
            "DELETE FROM budget WHERE rowid IN (SELECT rowid FROM budget WHERE day < ? LIMIT 1000)"
        )
        while self._execute(self._connection(), delete, (day,)).rowcount == 1000:
            pass

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
        if self._nowait_writes % self.CHECKPOINT_EVERY == 0 and (
            self._checkpointing is None or self._checkpointing.done()
        ):
            self._checkpointing = asyncio.get_running_loop().run_in_executor(None, self._checkpoint)
        return result

    def _checkpoint(self) -> None:
        # A failed checkpoint is harmless: the WAL grows a little until the next one.
        with contextlib.suppress(sqlite3.Error):
            self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def close_async(self) -> None:
        # Closing a connection while a checkpoint runs on it crashes the interpreter.
        if self._checkpointing is not None:
            await self._checkpointing
        await super().close_async()

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()
        self._nowait = None
