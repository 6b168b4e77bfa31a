"""A fleet's Redis away for a while, mid-crawl, measured from the site's own log.

Run from the repository root:  ``python benchmarks/fleet_outage.py``  (needs ``redis-server``)

Two crawler processes (scrapy-redis's scheduler, a ``RedisSpider`` that follows
links, the add-on, ``MAX_IDLE_TIME_BEFORE_CLOSE = 8``) crawl HOSTS sites on
127.0.x.y, PAGES pages each (``Crawl-delay: 0.3``), all linked from one seed.  Once
100 pages are in, Redis stops; it restarts OUTAGE seconds later from its append-only
file (with ``--refuse``, it stays up but refuses every write meanwhile: out of
memory, ``maxmemory`` 1 byte under ``noeviction``).  Each setup in turn:

* ``host-ready``: the add-on's defaults (its shared queue, ``HostReadyRedisQueue``)
  with scrapy-redis's dupefilter;
* ``host-ready+dupefilter``: the same with the package's ``RedisDupeFilter``;
* ``scrapy-redis``: scrapy-redis's own ``PriorityQueue``.

Printed per run: page fetches against the pages there are (and how many pages were
fetched twice), gaps at a host below 0.95 times its Crawl-delay, tracebacks in the
processes' logs, each process's "unreachable" lines, and the run's wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from tests.budget.redis_server import RedisServer
from tests.scrapy.test_fleet import fleet_settings, seeded_sites, start_fleet, wait_all

SETUPS = ("host-ready", "host-ready+dupefilter", "scrapy-redis")
DELAY = 0.3
STOP_AFTER = 100  # pages


def run(setup: str, hosts: int, pages: int, outage: float, refuse: bool) -> str:
    fetched: Counter[tuple[str, str]] = Counter()

    def on_page(host: str, path: str, headers: object) -> None:
        fetched[host, path] += 1

    server = RedisServer(durable=True)
    site = seeded_sites(hosts, 1500, pages, DELAY, on_page)
    began = time.monotonic()
    try:
        settings = fleet_settings(
            server.url, DOMAINBUDGET_ENABLED=False, MAX_IDLE_TIME_BEFORE_CLOSE=8
        )
        del settings["FLEET_REDIS_URL"]  # the add-on's: scrapy-redis's Redis
        if setup.startswith("host-ready"):
            del settings["SCHEDULER_QUEUE_CLASS"]  # the add-on's shared queue
        if setup.endswith("dupefilter"):
            settings["DUPEFILTER_CLASS"] = "scrapy_rfc9309.dupefilter.RedisDupeFilter"
        fleet = start_fleet(settings, [site.url(site.hosts[0], "/seed")], processes=2)
        while sum(fetched.values()) < STOP_AFTER:
            time.sleep(0.02)
        if refuse:
            client = redis.Redis.from_url(server.url)
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", 1)
            time.sleep(outage)
            client.config_set("maxmemory", 0)
        else:
            server.stop()
            time.sleep(outage)
            server.restart()
        logs: list[str] = []
        wait_all(fleet, logs=logs, timeout=600)
    finally:
        site.close()
        server.stop()
    short = sum(gap[0] < 0.95 * DELAY for gap in site.gaps())
    return (
        f"{setup:<22} {sum(fetched.values()):>5} of {hosts * pages:<5}"
        f" {sum(count > 1 for count in fetched.values()):>6} {short:>10}"
        f" {sum(log.count('Traceback') for log in logs):>10}"
        f" {'/'.join(str(log.count('Fleet Redis unreachable')) for log in logs):>12}"
        f" {time.monotonic() - began:>8.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--outage", type=float, default=10.0, help="seconds Redis is away")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument(
        "--refuse", action="store_true", help="Redis refuses writes instead of stopping"
    )
    args = parser.parse_args()
    away = "refusing writes" if args.refuse else "stopped"
    print(
        f"2 processes, {args.hosts} hosts x {args.pages} pages, Crawl-delay {DELAY} s; Redis "
        f"{away} after {STOP_AFTER} pages, back {args.outage:g} s later"
    )
    print(
        f"{'setup':<22} {'fetches':>14} {'twice':>6} {'short gaps':>10} {'tracebacks':>10}"
        f" {'unreachable':>12} {'wall (s)':>8}"
    )
    for _ in range(args.rounds):
        for setup in args.setups:
            print(run(setup, args.hosts, args.pages, args.outage, args.refuse), flush=True)


if __name__ == "__main__":
    main()
