"""What a hostile site can cost a crawl: the figures of the README's "Security" section.

Run from the repository root:  ``python benchmarks/bench_hostile.py``

* peak RSS of a crawl (a fresh process, the add-on at its defaults) of 16 sites at
  once whose robots.txt is a plain file, or a decompression bomb of 1 GiB;
* parse + first check, worst check, and memory held, for 500 KiB bodies of the
  shapes that used to be slow;
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import brotli

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrapy_rfc9309 import RobotsTxt  # noqa: E402

HEAD = b"User-agent: *\nDisallow: /private\n"
INFLATED_MIB = 1024
SITES = 16


def _blocks():
    yield HEAD
    block = b"\n" * (1 << 20)
    for _ in range(INFLATED_MIB):
        yield block


def _gzip(chunks):
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    return b"".join(compressor.compress(chunk) for chunk in chunks) + compressor.flush()


def bodies() -> dict[str, tuple[str | None, bytes]]:
    compressor = brotli.Compressor(quality=5)
    br = b"".join(compressor.process(chunk) for chunk in _blocks()) + compressor.finish()
    gzipped = _gzip(_blocks())
    return {
        "plain 35 B file": (None, HEAD),
        "br bomb": ("br", br),
        "gzip bomb": ("gzip", gzipped),
        "gzip-in-gzip bomb": ("gzip, gzip", _gzip([gzipped])),
    }


def serve(encoding: str | None, body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else 40 ms per one-at-a-time response

        def do_GET(self) -> None:
            payload = body if self.path == "/robots.txt" else b"<html></html>"
            self.send_response(200)
            if encoding and self.path == "/robots.txt":
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the crawler stops reading a bomb
                self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def crawl_peak_rss(
    urls: list[str], extra: dict[str, object] | None = None
) -> tuple[float, float, dict[str, Any]]:
    """Peak RSS (MiB), wall time and stats of a crawl of *urls* in a fresh process."""
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": 2 * SITES,
        **(extra or {}),
    }
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.crawl_process", json.dumps(settings), *urls],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    stdout, _ = process.communicate()
    stats = json.loads(stdout.decode().strip().splitlines()[-1])
    # The crawl's own peak: a parent's ru_maxrss of it counts the parent's memory too.
    return stats["test/peak_rss_kib"] / 1024, time.perf_counter() - start, stats


def memory_table() -> None:
    print(f"Crawl of {SITES} sites at once, robots.txt of each as below (bombs inflate to 1 GiB)")
    print(f"{'robots.txt':<20} {'sent':>9} {'peak RSS':>9} {'time':>6}  obeyed, truncated")
    for name, (encoding, body) in bodies().items():
        servers = [serve(encoding, body) for _ in range(SITES)]
        urls = [
            f"http://127.0.0.1:{s.server_address[1]}{path}"
            for s in servers
            for path in ("/a", "/private")
        ]
        peak, seconds, stats = crawl_peak_rss(urls)
        forbidden, truncated = stats.get("rfc9309/forbidden", 0), stats.get("rfc9309/truncated", 0)
        print(
            f"{name:<20} {len(body):>8,}B {peak:>6.0f} MiB {seconds:>5.1f}s"
            f"  {forbidden}/{SITES} /private dropped, {truncated} truncated"
        )
        for server in servers:
            server.shutdown()
            server.server_close()


def shapes() -> dict[str, bytes]:
    """500 KiB bodies of the shapes that used to be slow (quadratic, or slow checks)."""

    def fill(line: bytes, head: bytes = b"User-agent: *\n") -> bytes:
        return head + line * ((512_000 - len(head)) // len(line))

    agents = b"".join(
        b"User-agent:%s\n" % bytes(97 + int(d) for d in str(i)) for i in range(30_000)
    )
    return {
        "30,000 user-agents": agents + b"Disallow: /\n",
        "36,000 x Disallow: /*ab": fill(b"Disallow: /*ab\n"),
        "Sitemap lines": b"".join(b"Sitemap: /s%05d\n" % i for i in range(30_000)),
        "huge Request-rates": fill(b"Request-rate: " + b"1" * 400 + b"/5\n"),
        "wildcard runs": fill(b"Disallow: /*a*a*a*a*a*a*a*a*a*b$\n"),
        "distinct /*a<n>*b$ rules": b"User-agent: *\n"
        + b"".join(b"Disallow: /*a%d*b$\n" % i for i in range(25_000))[:511_000],
        "NUL and invalid UTF-8": fill(b"\x00\xff\xfe" * 26 + b"\n"),
    }


def parse_table() -> None:
    url = "/" + "a" * 2000
    print()
    print(
        "500 KiB hostile bodies, 2 KB URL: parse + first check, the second check (the first\n"
        "or the second compiles the rules), a later check, memory held after the first check"
    )
    print(f"{'body':<26} {'parse+check':>12} {'second':>10} {'later':>10} {'held':>9}")
    for name, body in shapes().items():
        start = time.perf_counter()
        robots = RobotsTxt.parse(body)
        robots.check(url, "bot")
        first = time.perf_counter() - start
        start = time.perf_counter()
        robots.check(url, "bot")
        second = time.perf_counter() - start
        start = time.perf_counter()
        robots.check(url, "bot")
        again = time.perf_counter() - start
        del robots
        tracemalloc.start()
        robots = RobotsTxt.parse(body)
        robots.check(url, "bot")
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(
            f"{name:<26} {first * 1000:>9.1f} ms {second * 1000:>7.1f} ms"
            f" {again * 1000:>7.2f} ms {held / 2**20:>5.1f} MiB"
        )
        del robots


def reactor_table() -> None:
    """The longest the reactor is held while sites with the worst files found (see
    bench_core.worst_checks) are parsed and checked, in a crawl at the add-on's
    defaults: long bodies are parsed and compiled on a worker thread."""
    digits = "".join(map(str, range(1000)))
    pages = ["/ab" + digits[: 2060 - k] for k in range(20)]  # 2 KB URLs, as hostile as found
    print()
    print("Crawl of 4 sites with 500 KiB hostile files, 20 pages of 2 KB URLs each:")
    print(f"{'robots.txt':<24} {'reactor held, max':>18} {'time':>6}")
    for line in (b"Disallow: /*%d*ab\n", b"Disallow: /*%d*zz\n", b"Disallow: /ab*%d*a\n"):
        body = b"User-agent: *\n" + b"".join(line % n for n in range(25_000))[:500_000]
        body = body[: body.rindex(b"\n") + 1]
        servers = [serve(None, body) for _ in range(4)]
        urls = [f"http://127.0.0.1:{s.server_address[1]}{page}" for s in servers for page in pages]
        _, seconds, stats = crawl_peak_rss(urls, {"EXTENSIONS": {"tests.crawl.ReactorLag": 0}})
        name = line.decode().strip().replace("%d", "{n}")
        print(f"{name:<24} {stats['test/reactor_lag_max_ms']:>15.1f} ms {seconds:>5.1f}s")
        for server in servers:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    memory_table()
    parse_table()
    reactor_table()
