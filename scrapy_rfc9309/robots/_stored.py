"""robots.txt fetch results kept across restarts (RFC 9309 §2.4 lets a crawler use a
copy for up to 24 hours, and an older one while the file is unreachable).

A :class:`StoredRobots` is what a fetch gave: the outcome, the status, the body as
fetched (a 2xx only), when (seconds since the epoch: the store outlives the process),
for how long it is fresh, and the validators for a conditional refresh (``ETag``,
``Last-Modified``).  Two stores with the same asynchronous interface:

* :class:`SQLiteRobotsStore`: one file, every statement on one worker thread (never
  on the event loop); WAL, so a killed process leaves a usable file;
* :class:`RedisRobotsStore`: the fleet's Redis, one key per authority.

A record that does not read back as it was written (a body that does not match its
digest, a body longer than the size limit allows, a row of another schema version, JSON that is
not ours) is dropped: the caller fetches again.  A record is kept
:data:`KEEP_FOR` after its fetch, for the stale-copy fallback.  Pure Python and
asyncio: no Scrapy, no Twisted.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..fleet import authority_key, fleet_client

#: A record is deleted this long after its fetch (seconds): 30 days.
KEEP_FOR = 30 * 86400.0
#: The schema version of a store; a store of another version is emptied.
SCHEMA_VERSION = 1

_T = TypeVar("_T")


class StoreError(Exception):
    """The store cannot be read or written."""


@dataclass(frozen=True)
class StoredRobots:
    outcome: str  # a FetchOutcome value: "success" or "unavailable"
    status: int | None
    body: bytes | None
    fetched_at: float  # seconds since the epoch
    ttl: float  # fresh for this long after fetched_at
    etag: str | None = None
    last_modified: str | None = None
    reason: str | None = None

    def fresh(self, now: float, ttl: float) -> bool:
        """Whether the copy is younger than *ttl*: the reading crawl's
        ``RFC9309_CACHE_TTL`` decides, not the one of the crawl that stored it."""
        return self.fetched_at <= now < self.fetched_at + ttl

    def digest(self) -> str:
        return hashlib.sha1(self.body or b"").hexdigest()


def _valid(record: StoredRobots, max_bytes: int) -> bool:
    # A body is kept up to one byte past the limit: a parse of it then sees the cut
    # (RFC 9309 §2.5), as the parse of the fetched one did.
    return (
        record.outcome in ("success", "unavailable")
        and (record.body is None or len(record.body) <= max_bytes + 1)
        and record.ttl >= 0
    )


class SQLiteRobotsStore:
    """Stored robots.txt results in the SQLite file at *path* (created if missing).

    Reads and writes asked for while the worker thread is busy (a broad crawl asks
    for a new site's copy, and writes one, several times a second) go together in
    its next batch: one thread hop and one transaction for them all, the writes
    before the reads.  ``put`` returns once its record is committed.

    A file that is not an SQLite database, or is damaged, is moved aside (to
    ``<path>.corrupt``) and a new one made: :attr:`replaced` then says why.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS robots ("
        " authority TEXT PRIMARY KEY, outcome TEXT NOT NULL, status INTEGER,"
        " body BLOB, digest TEXT NOT NULL, fetched_at REAL NOT NULL, ttl REAL NOT NULL,"
        " etag TEXT, last_modified TEXT, reason TEXT)"
    )
    _COLUMNS = "outcome, status, body, digest, fetched_at, ttl, etag, last_modified, reason"

    def __init__(self, path: str | Path, max_bytes: int, now: Callable[[], float]) -> None:
        self.path = Path(path).absolute()
        self.max_bytes = max_bytes
        self.replaced: str | None = None
        self._now = now
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rfc9309-robots")
        self._connection: sqlite3.Connection | None = None
        #: What the next batch reads and writes, with who waits for it.
        self._reads: dict[str, list[asyncio.Future[StoredRobots | None]]] = {}
        self._writes: dict[str, tuple[StoredRobots, list[asyncio.Future[None]]]] = {}
        self._batching = False  # a batch is being gathered or run
        self._closed = False

    async def get(self, authority: str) -> StoredRobots | None:
        future: asyncio.Future[StoredRobots | None] = self._loop().create_future()
        self._reads.setdefault(authority, []).append(future)
        return await future

    async def put(self, authority: str, record: StoredRobots) -> None:
        future: asyncio.Future[None] = self._loop().create_future()
        _, waiting = self._writes.get(authority, (record, []))
        waiting.append(future)
        self._writes[authority] = (record, waiting)  # the last record asked for wins
        await future

    def _loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, with a batch started on it unless one is under way."""
        loop = asyncio.get_running_loop()
        if not self._batching:
            self._start_batch(loop)
        return loop

    def _start_batch(self, loop: asyncio.AbstractEventLoop) -> None:
        # Once the callbacks due now have run, so that what they ask for joins it.
        self._batching = True
        loop.call_soon(self._run_batch, loop)

    def _run_batch(self, loop: asyncio.AbstractEventLoop) -> None:
        reads, self._reads = self._reads, {}
        writes, self._writes = self._writes, {}
        if self._closed:
            self._answer(loop, None, reads, writes)
            return
        records = {authority: record for authority, (record, _) in writes.items()}
        done = loop.run_in_executor(
            self._executor, self._guarded, lambda: self._batch(records, list(reads))
        )
        done.add_done_callback(lambda finished: self._answer(loop, finished, reads, writes))

    def _answer(
        self,
        loop: asyncio.AbstractEventLoop,
        finished: asyncio.Future[dict[str, StoredRobots]] | None,
        reads: dict[str, list[asyncio.Future[StoredRobots | None]]],
        writes: dict[str, tuple[StoredRobots, list[asyncio.Future[None]]]],
    ) -> None:
        """Give each waiting read its record and each write its end (or the batch's
        error; a *finished* of ``None``: the store was closed)."""
        error = StoreError(f"robots.txt cache {self.path}: closed")
        if finished is not None:
            error = finished.exception()  # type: ignore[assignment]
        found: dict[str, StoredRobots] = {}
        if finished is not None and error is None:
            found = finished.result()
        for authority, waiting in reads.items():
            for future in waiting:
                _settle(future, found.get(authority), error)
        for _, waiting_writes in writes.values():
            for write in waiting_writes:
                _settle(write, None, error)
        self._batching = False
        if self._reads or self._writes:  # asked for while this batch ran
            self._start_batch(loop)

    def _guarded(self, call: Callable[[], _T]) -> _T:
        try:
            self._open()
            return call()
        except sqlite3.DatabaseError as exc:
            if self._connection is not None and _is_corrupt(exc):
                self._replace(exc)
                self._open()
                return call()
            raise StoreError(f"robots.txt cache {self.path}: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"robots.txt cache {self.path}: {exc}") from exc

    def _open(self) -> None:
        if self._connection is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        self._connection = connection
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")  # a killed process loses nothing
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            connection.execute("DROP TABLE IF EXISTS robots")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute(self._SCHEMA)
        connection.execute("DELETE FROM robots WHERE fetched_at < ?", (self._now() - KEEP_FOR,))

    def _replace(self, exc: Exception) -> None:
        """Move a damaged file aside; the next call makes a new one."""
        self._close_connection()
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{self.path}{suffix}").unlink()
        self.path.replace(f"{self.path}.corrupt")
        self.replaced = f"{exc}; moved to {self.path}.corrupt"

    def _batch(
        self, records: dict[str, StoredRobots], authorities: list[str]
    ) -> dict[str, StoredRobots]:
        """Write *records* in one transaction, then read the records of *authorities*
        (on the worker thread)."""
        connection = self._connection
        assert connection is not None
        if records:
            rows = [(authority, *_row_of(record)) for authority, record in records.items()]
            with connection:  # one transaction, rolled back if a statement fails
                connection.execute("BEGIN")
                connection.executemany(
                    f"INSERT OR REPLACE INTO robots (authority, {self._COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
        found = {}
        for start in range(0, len(authorities), _READ_AT_ONCE):
            some = authorities[start : start + _READ_AT_ONCE]
            marks = ", ".join("?" * len(some))
            for authority, *row in connection.execute(
                f"SELECT authority, {self._COLUMNS} FROM robots WHERE authority IN ({marks})",
                some,
            ):
                record = self._record(row)
                if record is None:
                    connection.execute("DELETE FROM robots WHERE authority = ?", (authority,))
                else:
                    found[authority] = record
        return found

    def _record(self, row: list[Any]) -> StoredRobots | None:
        """The record a row holds; ``None`` if it does not read back as written."""
        outcome, status, body, digest, fetched_at, ttl, etag, modified, reason = row
        try:
            record = StoredRobots(
                str(outcome), status, body, float(fetched_at), float(ttl), etag, modified, reason
            )
        except (TypeError, ValueError):
            return None
        if not _valid(record, self.max_bytes) or record.digest() != digest:
            return None
        return record

    def _close_connection(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None

    def close(self) -> None:
        """Close the file once the pending statements are done (without waiting)."""
        self._closed = True
        self._executor.submit(self._close_connection)
        self._executor.shutdown(wait=False)


#: At most this many authorities are read by one statement (SQLite's default limit
#: of bound parameters is 999 before 3.32).
_READ_AT_ONCE = 500


def _row_of(record: StoredRobots) -> tuple[Any, ...]:
    """The row of *record*, in :attr:`SQLiteRobotsStore._COLUMNS`' order."""
    r = record
    return (
        r.outcome,
        r.status,
        r.body,
        r.digest(),
        r.fetched_at,
        r.ttl,
        r.etag,
        r.last_modified,
        r.reason,
    )


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    message = str(exc).lower()
    return "not a database" in message or "malformed" in message or "corrupt" in message


class RedisRobotsStore:
    """Stored robots.txt results in the fleet's Redis at *url*: one JSON string per
    authority, ``{prefix}:{host}:{authority}`` (its host the hash tag), expiring
    :data:`KEEP_FOR` after its fetch."""

    def __init__(
        self, url: str, max_bytes: int, prefix: str = "rfc9309:robots-kept", timeout: float = 2.0
    ) -> None:
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.replaced: str | None = None
        self._redis = fleet_client(url, timeout)

    def key(self, authority: str) -> str:
        """The key of *authority*'s record."""
        return authority_key(self.prefix, authority)

    def decode(self, data: bytes) -> StoredRobots | None:
        """The record stored as *data*; ``None`` if it does not read back as written."""
        try:
            fields = json.loads(data)
            if fields.pop("version") != SCHEMA_VERSION:
                raise ValueError("another schema version")
            digest = fields.pop("digest")
            body = fields["body"]
            fields["body"] = base64.b64decode(body, validate=True) if body is not None else None
            record = StoredRobots(**fields)
            if not _valid(record, self.max_bytes) or record.digest() != digest:
                raise ValueError("damaged")
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        return record

    async def get(self, authority: str) -> StoredRobots | None:
        data = await self._call("GET", self.key(authority))
        if data is None:
            return None
        record = self.decode(data)
        if record is None:
            await self._call("DEL", self.key(authority))
        return record

    async def put(self, authority: str, record: StoredRobots) -> None:
        fields: dict[str, Any] = asdict(record)
        if record.body is not None:
            fields["body"] = base64.b64encode(record.body).decode()
        fields.update(version=SCHEMA_VERSION, digest=record.digest())
        keep_ms = max(int(KEEP_FOR * 1000), 1)
        await self._call("SET", self.key(authority), json.dumps(fields), "PX", keep_ms)

    async def _call(self, *args: str | int) -> Any:
        try:
            return await self._redis.call(*args)
        except Exception as exc:
            raise StoreError(f"robots.txt cache in the fleet Redis: {exc}") from exc

    def close(self) -> None:
        self._redis.close()
