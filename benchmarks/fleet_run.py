"""A fleet run, as a user would make it, measured from the site's own log.

Run from the repository root:  ``python benchmarks/fleet_run.py``  (needs ``redis-server``)

A local site asks ``Crawl-delay: 1`` and disallows ``/private/``; N crawler processes
(scrapy-redis scheduler and dupefilter, one redis-server, the add-on, a Redis budget
of 40 pages) crawl it: with scrapy-redis's settings only (the add-on shares through
``REDIS_URL``), with ``FLEET_REDIS_URL`` named, and with ``FLEET_REDIS_URL = False``
(each process alone).  Printed per run:
robots.txt fetches, requests/s at the site, the smallest and median gap between
requests, pages fetched (budget).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_budget

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = b"User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"


def serve(log: list[tuple[float, str]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else 40 ms per one-at-a-time response

        def do_GET(self) -> None:
            log.append((time.monotonic(), self.path))
            body = ROBOTS if self.path == "/robots.txt" else b"<html>page</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run(redis_url: str, processes: int, fleet: str, budget: int) -> str:
    """*fleet*: "default" (scrapy-redis's settings only), "named" (``FLEET_REDIS_URL``
    set), "" (``FLEET_REDIS_URL = False``)."""
    redis.Redis.from_url(redis_url).flushdb()
    log: list[tuple[float, str]] = []
    server = serve(log)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": "FleetBot/1.0",
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "REDIS_URL": redis_url,
        "DOMAINBUDGET_ENABLED": True,
        "DOMAINBUDGET_STORAGE": "scrapy_rfc9309.budget.storage.RedisStorage",
        "DOMAINBUDGET_REDIS_URL": redis_url,
        "DOMAINBUDGET_POLICY": {
            "default_policy": {"max_requests_per_day": 0, "max_pages_per_day": budget}
        },
        "REDIS_START_URLS_BATCH_SIZE": 2,
        "LOG_LEVEL": "ERROR",
        **({} if fleet == "default" else {"FLEET_REDIS_URL": redis_url if fleet else False}),
    }
    urls = [f"{base}/p/{i}" for i in range(budget * 2)] + [f"{base}/private/x"]
    server_redis = redis.Redis.from_url(redis_url)
    server_redis.rpush("pages:start_urls", *(json.dumps({"url": url}) for url in urls))
    server_redis.set("pages:started", 1)  # the processes close once idle from now on
    command = [sys.executable, "-m", "tests.crawl_process", "--redis-spider", json.dumps(settings)]
    crawlers = [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL) for _ in range(processes)
    ]
    for crawler in crawlers:
        crawler.wait()
    server.shutdown()
    times = sorted(t for t, path in log if path != "/robots.txt")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    pages = sum(1 for _, path in log if path.startswith("/p/"))
    rate = (len(times) - 1) / (times[-1] - times[0])
    return (
        f"{processes} process{'es' if processes > 1 else ''}, fleet {fleet or 'off':<7}"
        f"  {sum(1 for _, p in log if p == '/robots.txt'):>6}  {rate:>12.2f}"
        f"  {min(gaps) * 1000:>8.1f} ms  {statistics.median(gaps):>8.2f} s"
        f"  {pages:>3} ({budget})  {times[-1] - times[0]:>6.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=40)
    args = parser.parse_args()
    redis_server = bench_budget.start_redis()
    redis_url = redis_server.url
    try:
        print(
            f"{'run':<27}  robots  requests/s   min gap  median gap  pages (budget)  first to last"
        )
        runs = ((1, ""), (3, ""), (3, "default"), (3, "named"))
        for processes, fleet in runs:
            print(run(redis_url, processes, fleet, args.budget), flush=True)
    finally:
        redis_server.stop()


if __name__ == "__main__":
    main()
