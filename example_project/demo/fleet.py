"""``make fleet-demo``: two crawler processes of this project sharing one Redis.

It starts a local ``redis-server`` (on a free port of 127.0.0.1, nothing saved to
disk) and the demo site, pushes the site's start URL to the fleet's queue, runs two
``scrapy crawl fleet`` processes with the settings of the "Scaling out" recipe
(docs/fleet.md), then prints what the site's own server saw: how often robots.txt
was fetched, and the smallest gap between two requests against the Crawl-delay;
and how many responses each process got.  It stops everything it started, also on
Ctrl-C.
"""

from __future__ import annotations

import itertools
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from .site import DemoSite

PROCESSES = 2
PROJECT = Path(__file__).resolve().parents[1]
CRAWL_DELAY = 0.5  # what demo/site/robots.txt asks of DemoBot


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_redis(directory: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("make fleet-demo needs redis-server (e.g. apt-get install redis-server)")
    # A free port may be taken by another program before redis-server binds it: then
    # that program answers, and this redis-server has exited.  Another port, then.
    for _attempt in range(5):
        port = free_port()
        server = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                directory,
            ],
            stdout=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        for _ in range(100):
            try:
                ours = client.info("server")["process_id"] == server.pid
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            ours = False
        client.connection_pool.disconnect()
        if ours:
            return server, url
        server.kill()
        server.wait()
    sys.exit("redis-server did not start")


def fleet_settings(redis_url: str) -> dict[str, str]:
    """The "Scaling out" recipe (docs/fleet.md), with this Redis everywhere: the
    add-on (in the project's settings) shares politeness through scrapy-redis's
    ``REDIS_URL`` and picks the polite shared queue by itself."""
    return {
        "SPIDER_MODULES": "demo.spiders,demo.fleet_spider",
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_rfc9309.dupefilter.RedisDupeFilter",
        "SCHEDULER_PERSIST": "True",
        "REDIS_URL": redis_url,
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        "DOMAINBUDGET_STORAGE": "scrapy_rfc9309.budget.storage.RedisStorage",
        "DOMAINBUDGET_REDIS_URL": redis_url,
        "LOG_LEVEL": "INFO",  # the closing stats, read for the report
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        server, url = start_redis(directory)
        site = DemoSite()
        crawlers: list[subprocess.Popen[str]] = []
        try:
            redis.Redis.from_url(url).lpush("fleet:start_urls", f"{site.shop.url}/")
            options = [
                arg
                for name, value in fleet_settings(url).items()
                for arg in ("-s", f"{name}={value}")
            ]
            crawlers = [
                subprocess.Popen(
                    [sys.executable, "-m", "scrapy", "crawl", "fleet", *options],
                    cwd=PROJECT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(PROCESSES)
            ]
            logs = [crawler.communicate(timeout=180)[1] for crawler in crawlers]
        finally:
            for crawler in crawlers:
                if crawler.poll() is None:
                    crawler.kill()
            site.close()
            server.terminate()
            server.wait(timeout=10)
    print(report(site, logs))


def stat(log: str, name: str) -> int:
    """The value of the stat *name* in a crawl's closing stats in *log* (0: none)."""
    match = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(match.group(1)) if match else 0


def report(site: DemoSite, logs: list[str]) -> str:
    hits = site.shop.hits
    gaps = [later.time - earlier.time for earlier, later in itertools.pairwise(hits)]
    responses = [stat(log, "downloader/response_count") for log in logs]
    lines = [
        "",
        f"scrapy_rfc9309 fleet demo: {PROCESSES} crawler processes, one redis-server",
        f"  robots.txt fetched:      {sum(hit.path == '/robots.txt' for hit in hits)} time(s)"
        " by the whole fleet",
        f"  requests at the shop:    {len(hits)}, at the partner site: {len(site.partner.hits)}"
        " (its robots.txt answers 503: nothing else is fetched there)",
        "  responses per process:   " + ", ".join(map(str, responses)),
        "                           (a site has one owner process at a time: the demo's two"
        " sites may go to one process; a broad crawl's sites are shared)",
    ]
    if gaps:
        lines.append(
            f"  spacing at the shop:     min {min(gaps):.3f} s, mean "
            f"{sum(gaps) / len(gaps):.3f} s between consecutive requests"
            f" (Crawl-delay for DemoBot: {CRAWL_DELAY} s)"
        )
    errors = [error for log in logs for error in logged_errors(log)]
    lines += [f"  error: {error}" for error in errors[:5]]
    return "\n".join(lines) + "\n"


def logged_errors(log: str) -> list[str]:
    """The ERROR lines of *log*, each with the lines that follow it up to the next
    log line (its traceback)."""
    errors: list[str] = []
    inside = False
    for line in log.splitlines():
        if " ERROR: " in line:
            errors.append(line)
            inside = True
        elif inside and not re.match(r"\d{4}-\d\d-\d\d ", line):
            errors[-1] += "\n    " + line
        else:
            inside = False
    return errors


if __name__ == "__main__":
    main()
