"""Budget benchmark: reservations per second for each storage, and what budgets cost a crawl.

Run from the repository root:  ``python benchmarks/bench_budget.py``  (needs ``redis-server``)

1. Reservations/s of MemoryStorage, SQLiteStorage (a file in a temporary directory)
   and RedisStorage (a redis-server started on 127.0.0.1 for the run): the blocking
   ``reserve`` from one process and from 4 processes at once, and ``reserve_async``
   on an event loop with 16 reservations in flight, as the middleware makes them.
2. A 2,000-page local crawl without budgets, with the SQLite storage and with the
   Redis storage (unlimited budgets: every request still reserves), as in
   ``bench_crawl.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' helpers

import bench_crawl

from scrapy_rfc9309.budget.storage import MemoryStorage, RedisStorage, SQLiteStorage
from tests.budget.redis_server import RedisServer

DAY = "2026-11-22"


def make(kind: str, where: str):
    if kind == "memory":
        return MemoryStorage()
    if kind == "sqlite":
        return SQLiteStorage(where)
    return RedisStorage(where)


def reserve_many(kind: str, where: str, count: int) -> float:
    storage = make(kind, where)
    start = time.perf_counter()
    for number in range(count):
        storage.reserve(f"domain{number % 100}.com", DAY, 0, 0)
    elapsed = time.perf_counter() - start
    storage.close()
    return elapsed


def reserve_many_async(kind: str, where: str, count: int, in_flight: int = 16) -> float:
    """Like the middleware: ``reserve_async`` on an event loop, *in_flight* at a time."""
    storage = make(kind, where)

    async def worker(first: int) -> None:
        for number in range(first, count, in_flight):
            await storage.reserve_async(f"domain{number % 100}.com", DAY, 0, 0)

    async def run() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(worker(first) for first in range(in_flight)))
        elapsed = time.perf_counter() - start
        await storage.close_async()
        return elapsed

    return asyncio.run(run())


def rate(kind: str, where: str, processes: int, count: int) -> float:
    if processes == 1:
        return count / reserve_many(kind, where, count)
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        start = time.perf_counter()
        pool.starmap(reserve_many, [(kind, where, count // processes)] * processes)
        return count / (time.perf_counter() - start)


def start_redis() -> RedisServer:
    """A redis-server on a free port of 127.0.0.1 for the run, on core 1 (see
    :func:`bench_crawl.pin`)."""
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is needed (apt-get install redis-server)")
    server = RedisServer()
    bench_crawl.pin(server.process.pid, "redis")
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reservations", type=int, default=20_000)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    redis_server = start_redis()
    redis_url = redis_server.url
    try:
        with tempfile.TemporaryDirectory() as workdir:
            print(f"reservations/s ({args.reservations:,} reservations, 100 domains)")
            print(f"{'storage':<10} {'1 process':>12} {'4 processes':>12} {'async x16':>12}")
            for kind in ("memory", "sqlite", "redis"):
                where = f"{workdir}/{kind}.sqlite" if kind == "sqlite" else redis_url
                one = rate(kind, where, 1, args.reservations)
                # Memory counters are per process: 4 processes would share nothing.
                four = rate(kind, where, 4, args.reservations) if kind != "memory" else None
                on_loop = args.reservations / reserve_many_async(kind, where, args.reservations)
                four_text = f"{four:,.0f}" if four else "n/a"
                print(f"{kind:<10} {one:>12,.0f} {four_text:>12} {on_loop:>12,.0f}")
            print()
            modes = bench_crawl.BUDGET_MODES
            times = bench_crawl.compare(modes, args.pages, args.rounds, redis_url)
            bench_crawl.print_table(times, args.pages)
    finally:
        redis_server.stop()


if __name__ == "__main__":
    main()
