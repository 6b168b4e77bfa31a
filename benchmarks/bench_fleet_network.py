"""A fleet through a network: what each page costs the reactor in Redis calls.

Run from the repository root:  ``python benchmarks/bench_fleet_network.py``  (needs
``redis-server``)

Three scrapy-redis crawler processes (scrapy-redis's scheduler and dupefilter, the
add-on, ``FLEET_REDIS_URL``) crawl 200 loopback hosts, each with ``Crawl-delay: 1``
and 2 pages, through one redis-server reached over a TCP proxy that adds a chosen
round-trip time (half each way, order kept).  The pages are links on hub pages
(two a process, the start URLs), so they reach the processes through the shared
queue, as a crawl's discovered links do, not through scrapy-redis's start list
(which a process reads only when idle, a batch at a time); the pages printed
include the hubs.  For the project's shared queue (``HostReadyRedisQueue``) and
scrapy-redis's ``PriorityQueue`` side by side, at each round-trip time, printed per
page: how many pages each process fetched, the synchronous Redis calls (redis-py, on
the reactor's thread: each blocks it for a round trip; the dupefilter's aside, the
same in both), the asynchronous ones (the fleet's pipelined client: spacing,
robots.txt, budgets; they block nothing), the reactor time blocked, its share of
the crawl's wall time, and the smallest gap between two requests to one host at the
site.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

QUEUES = {
    "HostReadyRedisQueue": "scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
    "scrapy-redis PriorityQueue": "scrapy_redis.queue.PriorityQueue",
}
HOSTS = 200
PAGES = 2


def crawl_process(settings: dict[str, object]) -> None:
    """One crawler of the fleet (a scrapy-redis ``RedisSpider``), counting the Redis
    calls; the last line printed is what it counted, as JSON."""
    import redis
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.exceptions import DontCloseSpider
    from scrapy_redis.spiders import RedisSpider

    from scrapy_rfc9309._redis import PipelinedRedis
    from scrapy_rfc9309.fleet.script import SHA, SOURCE

    def ledger_function(args) -> str | None:  # type: ignore[no-untyped-def]
        """The ledger function an ``EVALSHA``/``EVAL`` calls (its name follows the keys)."""
        if args[0] not in ("EVALSHA", "EVAL") or args[1:2] not in ((SHA,), (SOURCE,)):
            return None
        name = args[3 + int(args[2])]
        return name.decode() if isinstance(name, bytes) else str(name)

    counted = {"sync": 0, "sync_seconds": 0.0, "dupefilter": 0, "async": 0}
    kinds: dict[str, int] = {}
    main_thread = threading.main_thread()
    execute = redis.Redis.execute_command

    def timed(self, *args, **options):  # type: ignore[no-untyped-def]
        if threading.current_thread() is not main_thread or str(args[1:2]).startswith("('bench:"):
            return execute(self, *args, **options)  # not the crawl's: the benchmark's own
        start = time.perf_counter()
        try:
            return execute(self, *args, **options)
        finally:
            if any(b"dupefilter" in str(arg).encode() for arg in args[1:2]):
                counted["dupefilter"] += 1
            else:
                counted["sync"] += 1
                counted["sync_seconds"] += time.perf_counter() - start
                function = ledger_function(args)
                name = f"ledger {function}" if function else f"{args[0]} {str(args[1:2])[:40]}"
                kinds[name] = kinds.get(name, 0) + 1

    redis.Redis.execute_command = timed  # type: ignore[method-assign]
    call = PipelinedRedis.call

    async def counting(self, *args):  # type: ignore[no-untyped-def]
        counted["async"] += 1
        function = ledger_function(args)
        if function:
            name = f"async ledger {function}"
        elif args[0] == "BLPOP":
            name = "async BLPOP wake"
        else:
            name = f"async {args[0]} " + str(args[1]).split(":{")[0].split(":")[-1]
        kinds[name] = kinds.get(name, 0) + 1
        return await call(self, *args)

    PipelinedRedis.call = counting  # type: ignore[method-assign]
    pipeline_execute = redis.client.Pipeline.execute

    def timed_pipeline(self, *args, **options):  # type: ignore[no-untyped-def]
        # One round trip for all its commands (scrapy-redis's queues pop so).
        start = time.perf_counter()
        try:
            return pipeline_execute(self, *args, **options)
        finally:
            counted["sync"] += 1
            counted["sync_seconds"] += time.perf_counter() - start
            kinds["pipeline"] = kinds.get("pipeline", 0) + 1

    redis.client.Pipeline.execute = timed_pipeline  # type: ignore[method-assign]

    bench = redis.Redis(port=int(os.environ["BENCH_REDIS_PORT"]), db=3)
    expected = int(os.environ["BENCH_PAGES"])

    class Pages(RedisSpider):
        name = "pages"
        redis_key = "pages:start_urls"
        pages = 0
        first = last = 0.0

        def spider_idle(self):  # type: ignore[no-untyped-def]
            # Open until the fleet has every page: a process idle for a while is
            # not done (the engine looks for requests every 5 s when idle).
            if int(bench.get("bench:pages") or 0) < expected:
                self.schedule_next_requests()
                raise DontCloseSpider

        def parse(self, response):  # type: ignore[no-untyped-def]
            yield from response.follow_all(css="a")  # pushed to the fleet's queue
            bench.incr("bench:pages")
            Pages.pages += 1
            Pages.last = time.perf_counter()
            Pages.first = Pages.first or Pages.last

    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Pages)
    process.crawl(crawler)

    def opened(spider):  # type: ignore[no-untyped-def]
        bench.incr("bench:ready")

    crawler.signals.connect(opened, signal=signals.spider_opened)
    process.start()
    counted["wall"] = Pages.last - Pages.first  # from its first page to its last
    counted["pages"] = Pages.pages
    kinds["requeued"] = crawler.stats.get_value("crawldelay/requeued", 0)
    print(json.dumps(kinds), file=sys.stderr)  # the synchronous calls by kind
    print(json.dumps(counted))


def run(
    queue: str,
    rtt: float,
    redis_port: int,
    processes: int,
    breakdown: bool,
    hosts: int = HOSTS,
    pages: int = PAGES,
    kept: bool = False,
) -> dict[str, float]:
    import redis

    from tests.broad_site import BroadSite, addresses
    from tests.delay_proxy import DelayProxy

    hubs = 2 * processes

    def respond(host, path, headers):  # type: ignore[no-untyped-def]
        if path == "/robots.txt":
            return 200, {}, b"User-agent: *\nCrawl-delay: 1\n"
        links = ""
        if path.startswith("/hub/"):  # the pages it links to: one in *hubs* of them
            links = "".join(
                f'<a href="{site.url(other, f"/p/{n}")}">p</a>'
                for n in range(pages)
                for other in site.hosts[int(path[5:]) :: hubs]
            )
        return 200, {"Content-Type": "text/html"}, f"<html><body>{links}</body></html>".encode()

    site = BroadSite(addresses(hosts, first=600), respond)
    proxy = DelayProxy(("127.0.0.1", redis_port), rtt / 1000)
    url = f"redis://127.0.0.1:{proxy.port}/3"
    server = redis.Redis(port=redis_port, db=3)
    server.flushdb()
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "SCHEDULER_QUEUE_CLASS": QUEUES[queue],
        "REDIS_URL": url,
        "FLEET_REDIS_URL": url,
        "REDIS_START_URLS_BATCH_SIZE": 2,  # spread the hubs over the processes
        "CONCURRENT_REQUESTS": 32,
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        "RFC9309_PERSISTENT_CACHE": kept,
    }
    try:
        fleet = [
            subprocess.Popen(
                [sys.executable, __file__, "--crawl", json.dumps(settings)],
                cwd=ROOT,
                env={
                    **os.environ,
                    "BENCH_REDIS_PORT": str(redis_port),
                    "BENCH_PAGES": str(hosts * pages + hubs),
                },
                stdout=subprocess.PIPE,
                stderr=None if breakdown else subprocess.DEVNULL,
                text=True,
            )
            for _ in range(processes)
        ]
        # The start URLs come once every process is up (a process started a second
        # later would otherwise find the short crawl mostly done).
        while int(server.get("bench:ready") or 0) < processes:
            time.sleep(0.05)
        server.rpush(
            "pages:start_urls",
            *(json.dumps({"url": site.url(site.hosts[k], f"/hub/{k}")}) for k in range(hubs)),
        )
        results = [
            json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in fleet
        ]
    finally:
        site.close()
    pages = sum(r["pages"] for r in results)
    gaps = [
        later - earlier
        for hits in site.arrivals.values()
        for (earlier, _), (later, _) in itertools.pairwise(sorted(hits))
    ]
    return {
        "pages": pages,
        "per process": [r["pages"] for r in results],
        "sync": sum(r["sync"] for r in results) / pages,
        "async": sum(r["async"] for r in results) / pages,
        "blocked_ms": 1000 * sum(r["sync_seconds"] for r in results) / pages,
        "share": sum(r["sync_seconds"] for r in results) / sum(r["wall"] for r in results),
        "min_gap": min(gaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt", type=float, nargs="+", default=[0, 1, 5], help="milliseconds")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=HOSTS)
    parser.add_argument("--pages", type=int, default=PAGES, help="pages a host")
    parser.add_argument(
        "--breakdown", action="store_true", help="each process's Redis calls by kind"
    )
    parser.add_argument(
        "--kept",
        action="store_true",
        help="robots.txt kept across restarts (in the fleet's Redis), as by default",
    )
    parser.add_argument(
        "--queue", choices=QUEUES, action="append", help="only this queue (repeatable)"
    )
    parser.add_argument("--crawl", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crawl:
        crawl_process(json.loads(args.crawl))
        return
    import bench_budget

    redis_server = bench_budget.start_redis()
    redis_url = redis_server.url
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    print(
        f"{args.processes} processes, {args.hosts} hosts x {args.pages} pages, Crawl-delay 1,"
        " Redis behind a proxy adding the round-trip time; per page: Redis calls blocking"
        " the reactor (dupefilter aside) and not, reactor time blocked; its share of the processes'"
        " time from their first page to their last;"
        " the smallest gap at a host (robots.txt included); ±even: the process furthest"
        " from an even share of the pages, how far"
    )
    print(
        f"{'RTT':>5} {'queue':<27} {'pages':>5} {'per process':>13} {'±even':>6}"
        f" {'blocking':>9}"
        f" {'async':>6} {'blocked':>9} {'share':>6} {'min gap':>8}"
    )
    try:
        for rtt in args.rtt:
            for queue in args.queue or QUEUES:
                r = run(
                    queue,
                    rtt,
                    port,
                    args.processes,
                    args.breakdown,
                    args.hosts,
                    args.pages,
                    args.kept,
                )
                spread = "/".join(str(n) for n in r["per process"])
                even = r["pages"] / len(r["per process"])
                off = max(abs(n - even) for n in r["per process"]) / even
                print(
                    f"{rtt:>3g}ms {queue:<27} {r['pages']:>5} {spread:>13} {off:>6.1%}"
                    f" {r['sync']:>9.2f}"
                    f" {r['async']:>6.2f} {r['blocked_ms']:>7.2f}ms {r['share']:>6.1%}"
                    f" {r['min_gap']:>7.3f}s"
                )
    finally:
        redis_server.stop()


if __name__ == "__main__":
    main()
