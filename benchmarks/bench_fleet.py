"""Fleet benchmark: what sharing spacing and robots.txt through Redis costs.

Run from the repository root:  ``python benchmarks/bench_fleet.py``  (needs ``redis-server``)

1. Spacing calls/s (``acquire`` then ``release``, one atomic script each, on the
   server's clock: what each floored request costs) on an event loop with 16 in
   flight, from 1 process and from 4 processes at once, 100 hosts.
2. The 2,000-page local crawl of ``bench_crawl.py`` with ``FLEET_REDIS_URL`` set,
   against the same crawl without it: for a host with no floor (no spacing call;
   robots.txt read from the fleet), and with a tiny floor (1 ms: every request
   acquires its host in Redis, and releases it when it ends).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_budget
import bench_crawl

from scrapy_rfc9309.fleet.spacing import FleetSpacing


def call_many(url: str, count: int, in_flight: int = 16) -> float:
    """Seconds for *count* calls, half ``acquire``, half ``release``."""

    async def run() -> float:
        spacing = FleetSpacing(url)

        async def worker(first: int) -> None:
            for number in range(first, count // 2, in_flight):
                host = f"host{number % 100}.example"
                await spacing.acquire(host, 0.0, 30.0)
                await spacing.release(host, 0.0)

        start = time.perf_counter()
        await asyncio.gather(*(worker(first) for first in range(in_flight)))
        elapsed = time.perf_counter() - start
        spacing.close()
        return elapsed

    return asyncio.run(run())


def rate(url: str, processes: int, count: int) -> float:
    if processes == 1:
        return count / call_many(url, count)
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        start = time.perf_counter()
        pool.starmap(call_many, [(url, count // processes)] * processes)
        return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    redis_server = bench_budget.start_redis()
    redis_url = redis_server.url
    try:
        one = rate(redis_url, 1, args.calls)
        four = rate(redis_url, 4, args.calls)
        print(f"spacing calls/s ({args.calls:,}: acquire + release, 100 hosts, 16 in flight)")
        print(f"{'1 process':>12} {'4 processes':>12}")
        print(f"{one:>12,.0f} {four:>12,.0f}")
        print()
        times = bench_crawl.compare(bench_crawl.FLEET_MODES, args.pages, args.rounds, redis_url)
        bench_crawl.print_table(
            times,
            args.pages,
            baselines={
                mode: mode.replace("fleet-", "").replace("fleet", "rfc9309") for mode in times
            },
        )
    finally:
        redis_server.stop()


if __name__ == "__main__":
    main()
