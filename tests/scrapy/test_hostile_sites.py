"""Hostile sites meet the robots.txt fetch first (RFC 9309 §2.3.1, §2.5): real crawls
against local servers, asserting what the servers saw, what the crawl did, how long
it took and, for decompression bombs, the crawl subprocess's peak memory."""

import json
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import brotli
import pytest
import pytest_twisted

from tests import processes
from tests.crawl import crawl
from tests.server import Site

ROOT = Path(__file__).resolve().parents[2]
DISALLOW_ALL = b"User-agent: *\nDisallow: /\n"


def redirect(to):
    return {"status": 301, "headers": {"Location": to}}


# -- redirects to other schemes (RFC 9309 §2.3.1.2: a failed redirect) ---------


@pytest_twisted.ensureDeferred
async def test_a_redirect_to_a_local_file_is_never_read(site, tmp_path):
    local = tmp_path / "robots.txt"
    local.write_bytes(DISALLOW_ALL)
    site.route("/robots.txt", **redirect(local.as_uri()))
    crawler = await crawl([site.url + "/a"])
    assert site.paths() == ["/robots.txt", "/a"]  # the file was not obeyed: unavailable
    assert crawler.stats.get_value("rfc9309/redirect_scheme") == 1
    assert crawler.stats.get_value("rfc9309/unavailable") == 1
    assert crawler.stats.get_value("rfc9309/request_count") == 1


@pytest_twisted.ensureDeferred
async def test_a_redirect_to_dev_zero_is_never_read(site):
    site.route("/robots.txt", **redirect("file:///dev/zero"))
    start = time.monotonic()
    crawler = await crawl([site.url + "/a"])
    assert site.paths() == ["/robots.txt", "/a"]
    assert crawler.stats.get_value("rfc9309/redirect_scheme") == 1
    assert time.monotonic() - start < 30  # reading /dev/zero ran until MemoryError


@pytest_twisted.ensureDeferred
async def test_a_redirect_to_a_data_url_is_not_obeyed(site):
    site.route("/robots.txt", **redirect("data:text/plain,User-agent:%20*%0ADisallow:%20/"))
    crawler = await crawl([site.url + "/a"])
    assert site.paths() == ["/robots.txt", "/a"]
    assert crawler.stats.get_value("rfc9309/redirect_scheme") == 1


@pytest.fixture
def ftp_port():
    """A port that accepts connections and closes them at once; counts them."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            accepted.append(connection)
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()


def test_a_redirect_to_ftp_never_hangs_the_crawl(site, ftp_port):
    # Scrapy's FTP handler ignores download_timeout: the crawl used to hang forever.
    port, accepted = ftp_port
    site.route("/robots.txt", **redirect(f"ftp://127.0.0.1:{port}/robots.txt"))
    result = run_crawl({"RFC9309_TIMEOUT": 2}, [site.url + "/a"], timeout=60)
    assert result.stats["rfc9309/redirect_scheme"] == 1
    assert site.paths() == ["/robots.txt", "/a"]
    assert accepted == []  # no FTP connection was even tried


@pytest_twisted.ensureDeferred
async def test_a_scheme_relative_redirect_keeps_the_scheme(site, other_site):
    other_site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n")
    site.route("/robots.txt", **redirect(f"//localhost:{other_site.port}/robots.txt"))
    await crawl([site.url + "/a", site.url + "/private"])
    assert other_site.paths() == ["/robots.txt"]
    assert sorted(site.paths()) == ["/a", "/robots.txt"]


# -- time: one deadline for the whole fetch -------------------------------------


@pytest_twisted.ensureDeferred
async def test_rfc9309_timeout_bounds_the_whole_redirect_chain(site):
    # Each hop answers within the timeout; together they take longer than it.
    for hop in range(5):
        site.route(f"/r{hop}" if hop else "/robots.txt", delay=0.6, **redirect(f"/r{hop + 1}"))
    site.route("/r5", body=b"User-agent: *\nAllow: /\n")
    crawler = await crawl([site.url + "/a"], RFC9309_TIMEOUT=1.5)
    assert "/r5" not in site.paths() and "/a" not in site.paths()  # unreachable: disallowed
    assert crawler.stats.get_value("rfc9309/unreachable") == 1


@pytest_twisted.ensureDeferred
async def test_a_body_sent_one_byte_a_second_ends_at_the_timeout(site):
    def trickle():
        yield b"User-agent: *\n"
        for _ in range(30):
            time.sleep(1)
            yield b"#"

    site.route("/robots.txt", body=trickle)
    start = time.monotonic()
    crawler = await crawl([site.url + "/a"], RFC9309_TIMEOUT=1)
    assert time.monotonic() - start < 10  # the body would take 30 s
    assert site.paths() == ["/robots.txt"]
    assert crawler.stats.get_value("rfc9309/exception_count/DownloadTimeoutError") == 1


# -- numbers ----------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_absurd_request_rates_are_ignored_and_the_file_cached(site):
    site.route(
        "/robots.txt",
        body=b"User-agent: *\nRequest-rate: "
        + b"1" * 5000
        + b"/5\nRequest-rate: 1"
        + b"0" * 400
        + b"/5\nDisallow: /private\n",
    )
    crawler = await crawl([site.url + p for p in ("/a", "/b", "/c", "/private")])
    assert sorted(site.paths()) == ["/a", "/b", "/c", "/robots.txt"]  # fetched once
    assert crawler.stats.get_value("rfc9309/forbidden") == 1


# -- decompression bombs: memory, in a crawl subprocess -------------------------

HEAD = b"User-agent: *\nDisallow: /private\n"
INFLATED_MIB = 256


def _blocks():
    yield HEAD
    block = b"\n" * (1 << 20)
    for _ in range(INFLATED_MIB):
        yield block


def _gzip(chunks):
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    return b"".join(compressor.compress(chunk) for chunk in chunks) + compressor.flush()


@pytest.fixture(scope="module")
def bombs():
    """robots.txt bodies of 256 MiB once decoded: (Content-Encoding, body)."""
    compressor = brotli.Compressor(quality=5)
    br = b"".join(compressor.process(chunk) for chunk in _blocks()) + compressor.finish()
    gzipped = _gzip(_blocks())
    return {
        "br": ("br", br),  # ~0.5 KB
        "gzip": ("gzip", gzipped),  # ~260 KB: under the download cap, all of it arrives
        "gzip-gzip": ("gzip, gzip", _gzip([gzipped])),  # ~1 KB
    }


class CrawlResult:
    def __init__(self, stats, peak_rss_mib, elapsed):
        self.stats, self.peak_rss_mib, self.elapsed = stats, peak_rss_mib, elapsed


def run_crawl(settings, urls, timeout=120, memory_limit_gib=3):
    """A crawl with the add-on in a subprocess: its stats, peak RSS and duration.

    The subprocess gets an address-space limit, so a regression fails fast with
    MemoryError instead of taking the machine's memory."""
    full = {"ADDONS": {"scrapy_rfc9309.Addon": 500}, "ROBOTSTXT_OBEY": True, **settings}

    def limit_memory():
        limit = memory_limit_gib << 30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.crawl_process", json.dumps(full), *urls],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            preexec_fn=limit_memory,
        )
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"the crawl ran past {timeout} s") from None
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    assert process.returncode == 0, stderr[-3000:]
    stats = json.loads(stdout.strip().splitlines()[-1])
    return CrawlResult(stats, stats["test/peak_rss_kib"] / 1024, time.monotonic() - start)


@pytest.fixture
def sixteen_sites():
    sites = [Site() for _ in range(16)]
    yield sites
    for site in sites:
        site.close()


def test_decompression_bombs_cost_a_few_mib_sixteen_at_once(bombs, sixteen_sites):
    encodings = ["br", "gzip", "gzip-gzip"]
    for number, site in enumerate(sixteen_sites):
        encoding, body = bombs[encodings[number % 3]]
        site.route("/robots.txt", body=body, headers={"Content-Encoding": encoding})
    urls = [site.url + path for site in sixteen_sites for path in ("/a", "/private")]
    result = run_crawl({"CONCURRENT_REQUESTS": 32}, urls)
    # The head of each file is parsed and obeyed: /a fetched, /private not.
    for site in sixteen_sites:
        assert sorted(site.paths()) == ["/a", "/robots.txt"]
    assert result.stats["rfc9309/truncated"] == 16
    assert result.stats["rfc9309/success"] == 16
    # 16 bombs of 256 MiB each (5 or 6 of each encoding): the whole crawl stays near a
    # bare crawl's ~70 MiB.
    assert result.peak_rss_mib < 200, f"peak RSS {result.peak_rss_mib:.0f} MiB"


def test_a_slow_robots_txt_in_scrapy_robots_ends_at_the_timeout(site, tmp_path):
    def trickle():
        for _ in range(60):
            time.sleep(1)
            yield b"#"

    site.route("/robots.txt", body=trickle)
    start = time.monotonic()
    result = processes.run(
        "scrapy", "robots", site.url + "/a", "-s", "RFC9309_TIMEOUT=2", cwd=tmp_path, timeout=60
    )
    assert time.monotonic() - start < 20  # the body would take 60 s
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "unreachable" in line


# The crawl tests above cover /dev/zero and data: for the fetch scrapy robots shares.
@pytest.mark.parametrize("target", ["file:///etc/hostname", "ftp://127.0.0.1:1/"])
def test_scrapy_robots_follows_redirects_to_http_only(site, tmp_path, target):
    if target.startswith("file:///etc"):
        local = tmp_path / "robots.txt"
        local.write_bytes(DISALLOW_ALL)
        target = local.as_uri()
    site.route("/robots.txt", **redirect(target))
    result = processes.run("scrapy", "robots", site.url + "/a", cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr  # unavailable: allowed
    assert "robots.txt unavailable" in result.stdout
    assert "Traceback" not in result.stderr
    assert site.paths() == ["/robots.txt"]


def test_scrapy_robots_decodes_a_bomb_within_the_limit(bombs, site, tmp_path):
    encoding, body = bombs["br"]
    site.route("/robots.txt", body=body, headers={"Content-Encoding": encoding})
    result = processes.run("scrapy", "robots", site.url + "/private/x", cwd=tmp_path, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "DISALLOWED by 'Disallow: /private' (line 2)" in result.stdout


# -- a robots.txt that costs a lot to compile is compiled off the reactor -----------


@pytest_twisted.ensureDeferred
async def test_a_long_robots_txt_is_parsed_and_compiled_on_a_worker_thread(site, monkeypatch):
    """500 KiB of distinct wildcard rules cost a few hundred ms of CPU to parse and
    compile: none of it on the reactor's thread, where every other site waits."""
    from scrapy_rfc9309.robots import _prefixtree

    threads = []
    compile_rules = _prefixtree.RuleSet.__init__

    def spy(self, rules):
        threads.append(threading.current_thread())
        compile_rules(self, rules)

    monkeypatch.setattr(_prefixtree.RuleSet, "__init__", spy)
    rules = b"".join(b"Disallow: /*%d*zz\n" % n for n in range(25_000))  # 480 KB
    site.route("/robots.txt", body=b"User-agent: *\n" + rules)
    crawler = await crawl([site.url + "/ab1234", site.url + "/ab12zz"])
    assert site.paths() == ["/robots.txt", "/ab1234"]  # /ab12zz: Disallow: /*12*zz
    assert crawler.stats.get_value("rfc9309/forbidden") == 1
    assert threads and threading.main_thread() not in threads
