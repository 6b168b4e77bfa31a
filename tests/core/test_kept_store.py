"""The SQLite file robots.txt results are kept in across restarts: what many
concurrent reads and writes get, against a real file."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest_twisted

from scrapy_rfc9309.robots import SQLiteRobotsStore, StoredRobots, StoreError
from scrapy_rfc9309.robots._stored import WRITE_AFTER

from ..helpers import REFUSE_ROBOTS_WRITES, on_loop

NOW = time.time()


def record(body: bytes, fetched_at: float = NOW) -> StoredRobots:
    return StoredRobots("success", 200, body, fetched_at, 86400.0, etag='"e"')


@pytest_twisted.ensureDeferred
async def test_many_concurrent_writes_and_reads_each_get_their_own_record(tmp_path):
    path = tmp_path / "robots.sqlite"

    async def crawl() -> list[StoredRobots | None]:
        store = SQLiteRobotsStore(path, 1000, time.time)
        authorities = [f"https://site{n}.example" for n in range(300)]
        await asyncio.gather(
            *(store.put(a, record(a.encode())) for a in authorities[:200]),
            store.put(authorities[0], record(b"the second write wins")),
        )
        found = await asyncio.gather(*(store.get(a) for a in authorities))
        await store.close()
        return found

    found = await on_loop(crawl())
    assert found[0] == record(b"the second write wins")
    assert found[1:200] == [record(f"https://site{n}.example".encode()) for n in range(1, 200)]
    assert found[200:] == [None] * 100  # never written
    with sqlite3.connect(path) as db:  # committed to the file, for the next crawl
        assert db.execute("SELECT COUNT(*) FROM robots").fetchone() == (200,)


@pytest_twisted.ensureDeferred
async def test_a_read_asked_with_a_write_of_the_same_site_sees_the_write(tmp_path):
    async def crawl() -> StoredRobots | None:
        store = SQLiteRobotsStore(tmp_path / "robots.sqlite", 1000, time.time)
        _, found = await asyncio.gather(
            store.put("https://a.example", record(b"new")), store.get("https://a.example")
        )
        await store.close()
        return found

    assert await on_loop(crawl()) == record(b"new")


@pytest_twisted.ensureDeferred
async def test_close_returns_once_every_queued_write_is_in_the_file(tmp_path):
    path = tmp_path / "robots.sqlite"

    async def crawl() -> None:
        store = SQLiteRobotsStore(path, 1000, time.time)
        for n in range(300):
            await store.put(f"https://site{n}.example", record(b"x" * 500))
        await store.close()

    await on_loop(crawl())
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM robots").fetchone() == (300,)


@pytest_twisted.ensureDeferred
async def test_an_unopenable_store_fails_reads_and_says_the_queued_write_at_close(tmp_path):
    (tmp_path / "robots.sqlite").mkdir()  # a directory where the file should be

    async def crawl() -> list[BaseException | StoredRobots | None]:
        store = SQLiteRobotsStore(tmp_path / "robots.sqlite", 1000, time.time)
        results: list[BaseException | StoredRobots | None] = []
        for call in (
            lambda: store.get("https://a.example"),
            lambda: store.put("https://a.example", record(b"x")),
            store.close,
        ):
            try:
                results.append(await call())
            except StoreError as exc:
                results.append(exc)
        return results

    results = await on_loop(crawl())
    assert isinstance(results[0], StoreError), results
    assert "robots.sqlite" in str(results[0])
    # The write was queued; close() says it failed.
    assert results[1] is None and isinstance(results[2], StoreError), results


@pytest_twisted.ensureDeferred
async def test_a_failed_write_is_raised_by_the_next_call_and_by_close(tmp_path):
    path = tmp_path / "robots.sqlite"

    async def crawl() -> list[str]:
        store = SQLiteRobotsStore(path, 1000, time.time)
        await store.put("https://made.example", record(b"x"))
        await store.close()
        with sqlite3.connect(path) as db:  # readable, and every write now fails
            db.execute(REFUSE_ROBOTS_WRITES)
        store = SQLiteRobotsStore(path, 1000, time.time)
        said: list[str] = []
        await store.put("https://a.example", record(b"x"))  # kept: no error yet
        assert await store.get("https://a.example") == record(b"x")  # from memory
        await asyncio.sleep(WRITE_AFTER + 0.5)  # written with its batch: it failed
        for call in (
            lambda: store.get("https://b.example"),
            lambda: store.put("https://b.example", record(b"y")),
            store.close,
        ):
            try:
                await call()
            except StoreError as exc:
                said.append(str(exc))
        return said

    said = await on_loop(crawl())
    assert len(said) == 3 and all("the disk refuses" in text for text in said), said


@pytest_twisted.ensureDeferred
async def test_a_damaged_row_reads_as_missing_and_is_deleted(tmp_path):
    path = tmp_path / "robots.sqlite"

    async def put_then_get() -> tuple[StoredRobots | None, StoredRobots | None]:
        store = SQLiteRobotsStore(path, 1000, time.time)
        await store.put("https://a.example", record(b"kept"))
        await store.put("https://b.example", record(b"damaged"))
        await store.close()
        with sqlite3.connect(path) as db:
            db.execute(
                "UPDATE robots SET body = ? WHERE authority = ?", (b"x", "https://b.example")
            )
        store = SQLiteRobotsStore(path, 1000, time.time)
        kept, damaged = await asyncio.gather(
            store.get("https://a.example"), store.get("https://b.example")
        )
        await store.close()
        return kept, damaged

    kept, damaged = await on_loop(put_then_get())
    assert kept == record(b"kept")
    assert damaged is None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT authority FROM robots").fetchall() == [("https://a.example",)]


@pytest_twisted.ensureDeferred
async def test_a_new_authority_costs_no_read_and_kept_records_are_written_in_batches(tmp_path):
    """The authorities the file holds are read once: one not among them is answered
    at once; records are written together, and a restart reads them back."""
    path = tmp_path / "robots.sqlite"

    async def crawl() -> tuple[int, int, list[StoredRobots | None]]:
        store = SQLiteRobotsStore(path, 1000, time.time)
        await store.put("https://kept.example", record(b"k"))
        await store.close()
        store = SQLiteRobotsStore(path, 1000, time.time)
        statements: list[str] = []
        assert await store.get("https://kept.example") == record(b"k")
        connection = store._connection
        assert connection is not None  # traced on the store's thread, where it is used
        await store._run(lambda: connection.set_trace_callback(statements.append))
        for number in range(300):  # new hosts: no statement, then one batch of writes
            assert await store.get(f"https://new{number}.example") is None
            await store.put(f"https://new{number}.example", record(b"n"))
        reads = sum(text.startswith("SELECT") for text in statements)
        await store.close()
        writes = sum(text.startswith("INSERT") for text in statements)
        store = SQLiteRobotsStore(path, 1000, time.time)
        found = await asyncio.gather(*(store.get(f"https://new{n}.example") for n in range(300)))
        await store.close()
        return reads, writes, list(found)

    reads, writes, found = await on_loop(crawl())
    assert reads == 0
    assert writes == 300  # in two transactions (256, then the rest at close)
    assert found == [record(b"n")] * 300


@pytest_twisted.ensureDeferred
async def test_a_restart_reads_the_kept_records_ahead_in_one_query(tmp_path):
    """A restarted crawl's hosts are answered from the records read at opening: no
    request waits for a read of its own."""
    path = tmp_path / "robots.sqlite"

    async def restart() -> tuple[int, list[StoredRobots | None]]:
        store = SQLiteRobotsStore(path, 1000, time.time)
        for number in range(100):
            await store.put(f"https://h{number}.example", record(b"%d" % number))
        await store.close()
        store = SQLiteRobotsStore(path, 1000, time.time)
        await store.open()
        statements: list[str] = []
        connection = store._connection
        assert connection is not None
        await store._run(lambda: connection.set_trace_callback(statements.append))
        found = [await store.get(f"https://h{number}.example") for number in range(100)]
        await store.close()
        return sum(text.startswith("SELECT") for text in statements), found

    reads, found = await on_loop(restart())
    assert reads == 0
    assert found == [record(b"%d" % number) for number in range(100)]
