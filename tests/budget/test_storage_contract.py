"""One contract, three storages: memory, SQLite on a real file, Redis on a real server."""

import asyncio
import multiprocessing
import sqlite3
import threading
import uuid

import pytest
import pytest_twisted

from scrapy_rfc9309.budget.storage import (
    KEEP_DAYS,
    MemoryStorage,
    RedisStorage,
    Reservation,
    SQLiteStorage,
    StorageError,
)
from tests.budget.process_worker import DAY, reserve_from_8_threads
from tests.helpers import on_loop


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        "redis",
        pytest.param(
            "redis-threaded",
            # redis-py 8 deprecates the option that makes the storage use it.
            marks=pytest.mark.filterwarnings("ignore:.*lib_name:DeprecationWarning"),
        ),
    ]
)
def storage(request, tmp_path):
    if request.param == "memory":
        store = MemoryStorage()
    elif request.param == "sqlite":
        store = SQLiteStorage(tmp_path / "budget.sqlite")
    else:
        url = request.getfixturevalue("redis_server").url
        if request.param == "redis-threaded":
            # An option the pipelined client does not take (every other option of a
            # redis:// URL it takes or ignores): redis-py in a worker thread.
            url += "?lib_name=budget-test"
        store = RedisStorage(url, prefix=f"test-{uuid.uuid4().hex}")
        assert store.pipelined == (request.param != "redis-threaded")
    yield store
    store.close()


def test_reserve_counts_requests_and_pages_until_a_limit(storage):
    results = [storage.reserve("a.com", DAY, max_requests=3, max_pages=0) for _ in range(5)]
    assert results == [Reservation.GRANTED] * 3 + [Reservation.REQUESTS_EXHAUSTED] * 2
    assert storage.usage(DAY) == {"a.com": (3, 3)}


def test_page_limit(storage):
    results = [storage.reserve("a.com", DAY, max_requests=10, max_pages=2) for _ in range(3)]
    assert results[-1] is Reservation.PAGES_EXHAUSTED
    storage.release_page("a.com", DAY)  # a reserved page turned out not to be one
    assert storage.reserve("a.com", DAY, 10, 2) is Reservation.GRANTED
    assert storage.usage(DAY) == {"a.com": (3, 2)}


def test_zero_means_unlimited(storage):
    assert all(storage.reserve("a.com", DAY, 0, 0) is Reservation.GRANTED for _ in range(50))


def test_count_request_is_never_refused_and_counts(storage):
    storage.reserve("a.com", DAY, 1, 0)
    storage.count_request("a.com", DAY)
    assert storage.usage(DAY) == {"a.com": (2, 1)}
    assert storage.reserve("a.com", DAY, 1, 0) is Reservation.REQUESTS_EXHAUSTED


def test_domains_and_days_are_independent(storage):
    storage.reserve("a.com", DAY, 1, 0)
    assert storage.reserve("b.com", DAY, 1, 0) is Reservation.GRANTED
    assert storage.reserve("a.com", "2026-11-23", 1, 0) is Reservation.GRANTED
    assert storage.usage(DAY) == {"a.com": (1, 1), "b.com": (1, 1)}


def test_release_never_goes_below_zero(storage):
    storage.count_request("a.com", DAY)
    storage.release_page("a.com", DAY)
    storage.release_page("b.com", DAY)
    assert storage.usage(DAY)["a.com"] == (1, 0)


def test_reset(storage):
    storage.reserve("a.com", DAY, 1, 0)
    storage.reset("a.com", DAY)
    assert storage.usage(DAY) == {}
    assert storage.reserve("a.com", DAY, 1, 0) is Reservation.GRANTED


def test_the_days_before_a_day_are_forgotten_or_expire(storage):
    """A storage keeps KEEP_DAYS days of counters: Redis keys expire by themselves
    (``test_redis_keys_expire_after_a_few_days``); the others delete older days."""
    days = ["2026-01-01", "2026-01-03", "2026-01-04"]
    for day in days:
        storage.reserve("a.com", day, 0, 0)
    storage.forget_before("2026-01-03")
    kept = [day for day in days if storage.usage(day)]
    assert kept == (days if isinstance(storage, RedisStorage) else days[1:])


def test_threads_never_overshoot(storage):
    granted = []

    def worker():
        for _ in range(40):
            granted.append(storage.reserve("a.com", DAY, 100, 0))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert granted.count(Reservation.GRANTED) == 100
    assert storage.usage(DAY) == {"a.com": (100, 100)}


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_8_processes_x_8_threads_against_a_limit_of_100_grant_exactly_100(kind, tmp_path, request):
    if kind == "sqlite":
        where, prefix = str(tmp_path / "shared.sqlite"), ""
        SQLiteStorage(where).close()  # create the schema once
    else:
        where, prefix = request.getfixturevalue("redis_server").url, f"mp-{uuid.uuid4().hex}"
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        granted = pool.starmap(reserve_from_8_threads, [(kind, where, prefix)] * 8)
    assert sum(granted) == 100  # 1,600 attempts
    store = SQLiteStorage(where) if kind == "sqlite" else RedisStorage(where, prefix=prefix)
    assert store.usage(DAY) == {"a.com": (100, 100)}
    store.close()


def test_sqlite_persists_across_instances(tmp_path):
    path = tmp_path / "budget.sqlite"
    first = SQLiteStorage(path)
    first.reserve("a.com", DAY, 0, 0)
    first.close()
    assert SQLiteStorage(path).usage(DAY) == {"a.com": (1, 1)}


def test_sqlite_forgets_many_domains_of_a_day_a_batch_at_a_time(tmp_path):
    """The deletion goes a thousand rows to a transaction, until none is left."""
    store = SQLiteStorage(tmp_path / "budget.sqlite")
    for number in range(2500):
        store.count_request(f"d{number}.com", "2026-01-01")
    store.count_request("kept.com", "2026-01-04")
    store.forget_before("2026-01-02")
    assert store.usage("2026-01-01") == {}
    assert store.usage("2026-01-04") == {"kept.com": (1, 0)}
    store.close()


def test_sqlite_errors_are_wrapped(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(StorageError, match="SQLite budget storage"):
        SQLiteStorage(blocker / "budget.sqlite")


def test_redis_errors_are_wrapped():
    from tests.server import refused_port

    store = RedisStorage(f"redis://127.0.0.1:{refused_port()}/0", timeout=0.5)
    with pytest.raises(StorageError, match="Redis budget storage"):
        store.reserve("a.com", DAY, 1, 1)


def test_redis_keys_expire_after_a_few_days(redis_server):
    store = RedisStorage(redis_server.url, prefix=f"ttl-{uuid.uuid4().hex}")
    store.reserve("a.com", DAY, 0, 0)
    ttl = store.client.ttl(store._key(DAY, "a.com"))
    assert KEEP_DAYS * 86400 - 10 < ttl <= KEEP_DAYS * 86400
    store.close()


@pytest_twisted.ensureDeferred
async def test_async_methods_keep_the_same_contract(storage):
    async def scenario():
        results = [await storage.reserve_async("a.com", DAY, 3, 2) for _ in range(3)]
        await storage.release_page_async("a.com", DAY)
        results.append(await storage.reserve_async("a.com", DAY, 3, 2))
        await storage.count_request_async("a.com", DAY)
        await storage.close_async()
        return results

    results = await on_loop(scenario())
    assert results == [
        Reservation.GRANTED,
        Reservation.GRANTED,
        Reservation.PAGES_EXHAUSTED,  # refused: nothing counted
        Reservation.GRANTED,  # the page given back is free again
    ]
    assert storage.usage(DAY) == {"a.com": (4, 2)}  # 3 reserved + 1 counted request


@pytest_twisted.ensureDeferred
async def test_counts_read_one_key_without_changing_it(storage):
    storage.reserve("a.com", DAY, 0, 0)
    storage.count_request("a.com", DAY)
    storage.reserve("b.com", DAY, 0, 0)

    async def scenario():
        return [
            await storage.counts_async("a.com", DAY),
            await storage.counts_async("never.com", DAY),
            await storage.counts_async("a.com", "2026-11-23"),
        ]

    assert await on_loop(scenario()) == [(2, 1), (0, 0), (0, 0)]
    assert storage.counts("a.com", DAY) == (2, 1)
    assert storage.counts("never.com", DAY) == (0, 0)
    assert storage.usage(DAY) == {"a.com": (2, 1), "b.com": (1, 1)}


@pytest_twisted.ensureDeferred
async def test_async_reservations_from_many_tasks_never_overshoot(storage):
    async def scenario():
        results = await asyncio.gather(
            *(storage.reserve_async("a.com", DAY, 0, 20) for _ in range(64))
        )
        await storage.close_async()
        return results

    assert (await on_loop(scenario())).count(Reservation.GRANTED) == 20
    assert storage.usage(DAY) == {"a.com": (20, 20)}


@pytest_twisted.ensureDeferred
async def test_sqlite_async_never_waits_for_a_lock_on_the_event_loop(tmp_path):
    """While another writer holds the file, the loop keeps running; the reservation
    is made in a worker thread as soon as the lock is released."""
    path = tmp_path / "budget.sqlite"
    store = SQLiteStorage(path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock

    async def scenario():
        ticks = 0
        reservation = asyncio.ensure_future(store.reserve_async("a.com", DAY, 0, 0))
        while not reservation.done() and ticks < 20:
            await asyncio.sleep(0.01)  # the loop is free while the lock is held
            ticks += 1
        assert not reservation.done()
        await asyncio.to_thread(other.execute, "COMMIT")
        result = await reservation
        await store.close_async()
        return ticks, result

    ticks, result = await on_loop(scenario())
    assert ticks == 20 and result is Reservation.GRANTED
    assert SQLiteStorage(path).usage(DAY) == {"a.com": (1, 1)}
    other.close()


@pytest_twisted.ensureDeferred
async def test_a_redis_that_never_answers_does_not_freeze_the_event_loop(silent_port):
    """The loop keeps running while the reservation waits; after the timeout it
    fails with StorageError (the middleware's fail-open/deny policy takes over)."""
    store = RedisStorage(f"redis://127.0.0.1:{silent_port}/0", timeout=0.5)

    async def scenario():
        ticks = 0
        reservation = asyncio.ensure_future(store.reserve_async("a.com", DAY, 0, 0))
        while not reservation.done():
            await asyncio.sleep(0.01)
            ticks += 1
        with pytest.raises(StorageError, match=r"no reply from Redis within 0\.5 s"):
            await reservation
        await store.close_async()
        return ticks

    assert await on_loop(scenario()) >= 10  # a blocked loop would tick once at most


@pytest_twisted.ensureDeferred
async def test_sqlite_checkpoints_off_the_loop(tmp_path):
    path = tmp_path / "budget.sqlite"
    wal = path.with_name(path.name + "-wal")
    store = SQLiteStorage(path)
    store.CHECKPOINT_EVERY = 50

    async def scenario():
        for number in range(1000):
            await store.reserve_async(f"d{number}.com", DAY, 0, 0)
            if number % 50 == 49:
                await asyncio.sleep(0.1)  # let the checkpoint thread run
        # Measured while the store is open (closing always checkpoints). Without
        # checkpoints the WAL holds ~2,100 frames; with SQLite's own autocheckpoint on
        # the loop's connection, ~1,000; checkpointed every 50 writes, ~120 (300 seen
        # on a loaded machine).
        size = wal.stat().st_size
        await store.close_async()
        return size

    assert await on_loop(scenario()) < 600 * (4096 + 24)
    assert len(SQLiteStorage(path).usage(DAY)) == 1000


@pytest_twisted.ensureDeferred
async def test_sqlite_closes_safely_while_a_checkpoint_runs(tmp_path):
    # Closing a connection that a checkpoint thread is using crashed the interpreter.
    path = tmp_path / "budget.sqlite"
    for _ in range(5):
        store = SQLiteStorage(path)
        store.CHECKPOINT_EVERY = 1

        async def scenario(store=store):
            for number in range(200):
                await store.reserve_async(f"d{number}.com", DAY, 0, 0)
            await store.close_async()

        await on_loop(scenario())
    assert SQLiteStorage(path).usage(DAY)["d0.com"] == (5, 5)
