"""robots.txt fetch results kept across restarts (RFC 9309 §2.4 lets a crawler use a
copy for up to 24 hours, and an older one while the file is unreachable).

A :class:`StoredRobots` is what a fetch gave: the outcome, the status, the body as
fetched (a 2xx only), when (seconds since the epoch: the store outlives the process),
for how long it is fresh, and the validators for a conditional refresh (``ETag``,
``Last-Modified``).  Two stores with the same asynchronous interface:

* :class:`SQLiteRobotsStore`: one file, every statement on one worker thread (never
  on the event loop), a write queued there without the caller waiting for it; WAL, so
  a killed process leaves a usable file;
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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..fleet import authority_key, fleet_client

#: A record is deleted this long after its fetch (seconds): 30 days.
KEEP_FOR = 30 * 86400.0
#: The schema version of a store; a store of another version is emptied.
SCHEMA_VERSION = 1
#: Records kept are written together this long after the first of them (seconds),
#: or once this many wait: one transaction, not one a host (a broad crawl's new
#: hosts come by the hundred a second).
WRITE_AFTER = 1.0
WRITE_BATCH = 256
#: At opening, the newest records are read ahead up to this many bytes of bodies:
#: a restarted crawl's first requests find their hosts' copies in memory.
READ_AHEAD_BYTES = 16 * 2**20

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

    A file that is not an SQLite database, or is damaged, is moved aside (to
    ``<path>.corrupt``) and a new one made: :attr:`replaced` then says why.

    What a new host costs is kept small (a broad crawl meets thousands):

    * the authorities the file holds are read once, in one query, at :meth:`open`
      (or the first :meth:`get`), with the newest records up to
      :data:`READ_AHEAD_BYTES` of bodies; an authority not among them (nor written
      since) is answered ``None`` at once, one read ahead from memory, both without a
      trip to the store's thread;
    * :meth:`put` keeps the record in memory and returns; the records are written
      together, in one transaction, :data:`WRITE_AFTER` seconds after the first of
      them or once :data:`WRITE_BATCH` wait (a process killed meanwhile loses at most
      those); a :meth:`get` meanwhile answers from memory;
    * the :meth:`get` calls of one turn of the event loop are read in one query.

    A file shared by several processes on one machine: each reads which authorities
    it holds when it starts; a copy another process keeps later is not seen (that
    process's fetch is done again, once).  A write that fails makes every later
    call, :meth:`close` included, raise its :class:`StoreError`.  :meth:`close`
    returns once every record is written.
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
        self._write_error: StoreError | None = None  # set on the worker thread
        self._known: set[str] | None = None  # the authorities the file holds
        self._added: set[str] = set()  # kept before those were read
        self._loading: asyncio.Future[tuple[set[str], dict[str, StoredRobots]]] | None = None
        self._ahead: dict[str, StoredRobots] = {}  # read ahead, not asked for yet
        self._unwritten: dict[str, StoredRobots] = {}  # kept, not yet sent to be written
        self._writing: dict[str, StoredRobots] = {}  # sent, not yet written
        self._write_timer: asyncio.TimerHandle | None = None
        self._reads: dict[str, asyncio.Future[StoredRobots | None]] = {}

    async def _run(self, call: Callable[[], _T]) -> _T:
        return await asyncio.wrap_future(self._submit(self._guarded, call))

    def _submit(self, call: Callable[..., _T], *args: Any) -> Future[_T]:
        """*call* queued on the store's thread."""
        self._raise_write_error()
        try:
            return self._executor.submit(call, *args)
        except RuntimeError as exc:  # after close()
            raise StoreError(f"robots.txt cache {self.path}: {exc}") from exc

    def _raise_write_error(self) -> None:
        if self._write_error is not None:
            raise self._write_error

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

    async def open(self) -> None:
        """Read which authorities the file holds (once; a :meth:`get` does it if this
        was not called): done before a crawl's first request, no request waits for it."""
        if self._known is None:
            await self._load_known()

    async def get(self, authority: str) -> StoredRobots | None:
        self._raise_write_error()
        if self._known is None:
            await self._load_known()
        assert self._known is not None
        unwritten = self._unwritten.get(authority) or self._writing.get(authority)
        if unwritten is not None:
            return unwritten
        ahead = self._ahead.pop(authority, None)  # the caller keeps what it needs
        if ahead is not None:
            return ahead
        if authority not in self._known:
            return None
        read = self._reads.get(authority)
        if read is None:
            if not self._reads:  # the first of this turn: read them all at its end
                asyncio.get_running_loop().call_soon(self._read_batch)
            read = self._reads[authority] = asyncio.get_running_loop().create_future()
        return await asyncio.shield(read)

    async def _load_known(self) -> None:
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._run(self._index))
        loaded, ahead = await asyncio.shield(self._loading)
        if self._known is None:
            self._known, self._added = loaded | self._added, set()
            self._ahead = ahead

    def _index(self) -> tuple[set[str], dict[str, StoredRobots]]:
        """The authorities the file holds, and the newest records read ahead, up to
        :data:`READ_AHEAD_BYTES` of bodies (a restarted crawl's hosts are answered
        from memory, not each by a read its request waits for)."""
        assert self._connection is not None
        authorities = {row[0] for row in self._connection.execute("SELECT authority FROM robots")}
        ahead: dict[str, StoredRobots] = {}
        size = 0
        rows = self._connection.execute(
            f"SELECT authority, {self._COLUMNS} FROM robots ORDER BY fetched_at DESC"
        )
        for authority, *row in rows:
            size += len(row[2] or b"") + 200
            if size > READ_AHEAD_BYTES:
                break
            record = self._record(authority, row)
            if record is not None:
                ahead[authority] = record
        return authorities, ahead

    def _read_batch(self) -> None:
        reads, self._reads = self._reads, {}
        future = asyncio.ensure_future(self._run(lambda: self._get_many(list(reads))))

        def done(future: asyncio.Future[dict[str, StoredRobots | None]]) -> None:
            for authority, read in reads.items():
                if read.done():
                    continue
                if future.exception() is not None:
                    read.set_exception(future.exception())  # type: ignore[arg-type]
                else:
                    read.set_result(future.result().get(authority))

        future.add_done_callback(done)

    def _get_many(self, authorities: list[str]) -> dict[str, StoredRobots | None]:
        """The records of *authorities*, in one query a few hundred at a time;
        those that do not read back as written are deleted."""
        assert self._connection is not None
        found: dict[str, StoredRobots | None] = {}
        for start in range(0, len(authorities), 500):
            chunk = authorities[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self._connection.execute(
                f"SELECT authority, {self._COLUMNS} FROM robots WHERE authority IN ({marks})",
                chunk,
            )
            for authority, *row in rows:
                found[authority] = self._record(authority, row)
        return found

    def _record(self, authority: str, row: list[Any]) -> StoredRobots | None:
        assert self._connection is not None
        outcome, status, body, digest, fetched_at, ttl, etag, modified, reason = row
        try:
            record = StoredRobots(
                str(outcome), status, body, float(fetched_at), float(ttl), etag, modified, reason
            )
        except (TypeError, ValueError):
            record = None
        if record is None or not _valid(record, self.max_bytes) or record.digest() != digest:
            self._connection.execute("DELETE FROM robots WHERE authority = ?", (authority,))
            return None
        return record

    async def put(self, authority: str, record: StoredRobots) -> None:
        """Keep *record*; it is written with the others of the next batch."""
        self._raise_write_error()
        self._unwritten[authority] = record
        (self._known if self._known is not None else self._added).add(authority)
        if len(self._unwritten) >= WRITE_BATCH:
            self._write_unwritten()
        elif self._write_timer is None:
            loop = asyncio.get_running_loop()
            self._write_timer = loop.call_later(WRITE_AFTER, self._write_unwritten)

    def _write_unwritten(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        if not self._unwritten:
            return
        batch, self._unwritten = self._unwritten, {}
        self._writing.update(batch)  # answered from memory until the file has them
        future = self._submit(self._write, batch)
        loop = asyncio.get_running_loop()
        future.add_done_callback(lambda _: _call_soon(loop, self._written, batch))

    def _written(self, batch: dict[str, StoredRobots]) -> None:
        for authority, record in batch.items():
            if self._writing.get(authority) is record:
                del self._writing[authority]

    def _write(self, batch: dict[str, StoredRobots]) -> None:
        if self._write_error is not None:
            return
        try:
            self._guarded(lambda: self._put_many(batch))
        except StoreError as exc:
            self._write_error = exc

    def _put_many(self, batch: dict[str, StoredRobots]) -> None:
        assert self._connection is not None
        with self._connection:  # one transaction
            self._connection.execute("BEGIN")
            self._connection.executemany(
                f"INSERT OR REPLACE INTO robots (authority, {self._COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        authority,
                        record.outcome,
                        record.status,
                        record.body,
                        record.digest(),
                        record.fetched_at,
                        record.ttl,
                        record.etag,
                        record.last_modified,
                        record.reason,
                    )
                    for authority, record in batch.items()
                ],
            )

    def _close_connection(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None

    async def close(self) -> None:
        """Write what is unwritten, close the file once the queued statements are
        done; raise the :class:`StoreError` of a write that failed."""
        with contextlib.suppress(StoreError):  # raised below
            self._write_unwritten()
        try:
            await asyncio.wrap_future(self._executor.submit(self._close_connection))
        finally:
            self._executor.shutdown(wait=False)
        self._raise_write_error()


def _call_soon(loop: asyncio.AbstractEventLoop, call: Callable[..., Any], *args: Any) -> None:
    """*call* on *loop*'s thread (from the store's), unless the loop is closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(call, *args)


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

    async def open(self) -> None:
        """Nothing to read ahead: each :meth:`get` is one round trip."""

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

    async def close(self) -> None:
        self._redis.close()
