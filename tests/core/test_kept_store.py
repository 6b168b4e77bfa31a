"""The SQLite file robots.txt results are kept in across restarts: what many
concurrent reads and writes get, against a real file."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest_twisted

from scrapy_rfc9309.robots import SQLiteRobotsStore, StoredRobots, StoreError

from ..helpers import on_loop

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
        store.close()
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
        store.close()
        return found

    assert await on_loop(crawl()) == record(b"new")


@pytest_twisted.ensureDeferred
async def test_a_store_that_cannot_be_written_fails_every_waiting_call(tmp_path):
    (tmp_path / "robots.sqlite").mkdir()  # a directory where the file should be

    async def crawl() -> list[BaseException | StoredRobots | None]:
        store = SQLiteRobotsStore(tmp_path / "robots.sqlite", 1000, time.time)
        results = await asyncio.gather(
            store.put("https://a.example", record(b"x")),
            store.get("https://b.example"),
            return_exceptions=True,
        )
        store.close()
        return results

    results = await on_loop(crawl())
    assert all(isinstance(result, StoreError) for result in results), results
    assert "robots.sqlite" in str(results[0])


@pytest_twisted.ensureDeferred
async def test_a_damaged_row_reads_as_missing_and_is_deleted(tmp_path):
    path = tmp_path / "robots.sqlite"

    async def put_then_get() -> tuple[StoredRobots | None, StoredRobots | None]:
        store = SQLiteRobotsStore(path, 1000, time.time)
        await store.put("https://a.example", record(b"kept"))
        await store.put("https://b.example", record(b"damaged"))
        store.close()
        with sqlite3.connect(path) as db:
            db.execute(
                "UPDATE robots SET body = ? WHERE authority = ?", (b"x", "https://b.example")
            )
        store = SQLiteRobotsStore(path, 1000, time.time)
        kept, damaged = await asyncio.gather(
            store.get("https://a.example"), store.get("https://b.example")
        )
        store.close()
        return kept, damaged

    kept, damaged = await on_loop(put_then_get())
    assert kept == record(b"kept")
    assert damaged is None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT authority FROM robots").fetchall() == [("https://a.example",)]
