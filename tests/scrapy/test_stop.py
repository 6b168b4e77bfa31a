"""A stop is prompt and loses nothing: SIGTERM ends a crawl whose requests wait for a
Crawl-delay of 20 s within 15 s (short of the page's turn), and the resumed crawl
(``JOBDIR``, or a scrapy-redis queue) fetches the requests that were waiting, none
twice; ``CLOSESPIDER_TIMEOUT`` ends it as promptly.  In each mode a crawl runs in:
the package's queue, Scrapy's, without the reactor, the domain unit, and the
fleet's queues (scrapy-redis's, and the add-on's shared queue, across whose restart
the Crawl-delay holds too).

The site's robots.txt (``Crawl-delay: 20``) is kept from an earlier crawl, so that
the first page starts at once and the second waits 20 s after it."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import redis

from scrapy_rfc9309.robots import SQLiteRobotsStore, StoredRobots
from tests.helpers import WITHOUT_REACTOR
from tests.processes import crawl_process
from tests.server import Route

CRAWL_DELAY = 20
ROBOTS = f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode()
#: A prompt stop ends the crawl within this many seconds: generous for a loaded
#: machine, and short of what a stop that waited for the Crawl-delay takes.
PROMPT = CRAWL_DELAY - 5


def keep_robots_txt(path: Path, authority: str) -> None:
    """A copy of the site's robots.txt in the store kept across restarts, as an earlier
    crawl would have left it."""
    on_a_thread(SQLiteRobotsStore(path, 512_000, time.time), authority, ROBOTS)


def on_a_thread(store, authority: str, body: bytes) -> None:
    """*body* as *authority*'s kept robots.txt in *store*, put on a thread of its own
    (the test's reactor runs an asyncio loop here)."""
    record = StoredRobots(
        outcome="success",
        status=200,
        body=body,
        fetched_at=time.time(),
        ttl=3600,
        etag=None,
        last_modified=None,
        reason=None,
    )

    async def put() -> None:
        await store.put(authority, record)
        await store.close()

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, put()).result()


def hold_elsewhere(url: str, floor: float, lease: float) -> None:
    """Have the fleet's Redis at *url* hold the site's unit (127.0.0.1) for another
    process, as its request on the wire would, for *lease* seconds."""
    from scrapy_rfc9309.fleet.spacing import FleetSpacing

    async def acquire() -> float:
        spacing = FleetSpacing(url)
        try:
            return await spacing.acquire("127.0.0.1", floor, lease)
        finally:
            spacing.close()

    with ThreadPoolExecutor(1) as thread:
        assert thread.submit(asyncio.run, acquire()).result() == 0


def start(settings, urls, mode="--dedupe"):
    return crawl_process(mode, json.dumps(settings), *urls)


def pages(site):
    return [path for path in site.paths() if path.startswith("/p/")]


def stop_while_waiting(site, settings, urls, after=1.5, mode="--dedupe"):
    """Start a crawl (*mode*: see ``tests.crawl_process``), SIGTERM it *after* seconds
    once the first page was fetched (the second waits then); returns the seconds it
    took to exit, and its stats."""
    crawl = start(settings, urls, mode)
    wait_until(crawl, lambda: pages(site), "the first page")
    time.sleep(after)
    took, stdout, stderr = terminate(crawl)
    assert crawl.returncode == 0, stderr[-3000:]
    return took, json.loads(stdout.strip().splitlines()[-1])


def wait_until(crawl, condition, what, seconds=60):
    """Wait until *condition()*, while *crawl* runs, for at most *seconds*."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert crawl.poll() is None, crawl.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.05)


def terminate(crawl):
    """SIGTERM *crawl*: the seconds it took to exit, its output and its errors."""
    asked = time.monotonic()
    crawl.send_signal(signal.SIGTERM)
    try:
        stdout, stderr = crawl.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        crawl.kill()
        pytest.fail("the crawl did not stop within 60 s of SIGTERM")
    return time.monotonic() - asked, stdout, stderr


def resume(settings, urls, mode="--dedupe"):
    crawl = start(settings, urls, mode)
    try:
        stdout, stderr = crawl.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        crawl.kill()
        pytest.fail("the crawl did not end within 60 s")
    assert crawl.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


#: The modes a crawl runs in: the package's priority queue, Scrapy's, with the
#: registrable domain as the politeness unit, and (below) without the reactor.
MODES = {
    "package-queue": {},
    "scrapys-queue": {"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"},
    "domain-unit": {"CRAWLDELAY_UNIT": "domain"},
}
if WITHOUT_REACTOR:
    MODES["no-reactor"] = {"TWISTED_REACTOR_ENABLED": False}
    MODES["no-reactor-scrapys-queue"] = {**MODES["no-reactor"], **MODES["scrapys-queue"]}


def settings_for(tmp_path, site, **extra):
    kept = tmp_path / "robots.sqlite"
    keep_robots_txt(kept, site.url)
    return {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": "TestBot/1.0",
        "RFC9309_PERSISTENT_CACHE_PATH": str(kept),
        "LOG_LEVEL": "INFO",
        **extra,
    }


@pytest.mark.parametrize("mode", list(MODES))
def test_sigterm_is_prompt_and_the_resumed_jobdir_crawl_fetches_what_waited(site, tmp_path, mode):
    site.route("/robots.txt", body=ROBOTS)
    urls = [f"{site.url}/p/0", f"{site.url}/p/1"]
    settings = settings_for(tmp_path, site, JOBDIR=str(tmp_path / "job"), **MODES[mode])
    took, _ = stop_while_waiting(site, settings, urls)
    assert took < PROMPT
    assert pages(site) == ["/p/0"]
    stats = resume({**settings, "USER_AGENT": "TestBot/2.0"}, urls)
    assert stats["test/twisted_reactor"] is MODES[mode].get("TWISTED_REACTOR_ENABLED", True)
    assert sorted(pages(site)) == ["/p/0", "/p/1"]  # none lost, none twice
    assert "/robots.txt" not in site.paths()  # the kept copy, both times
    # The request kept is the one scheduled: the resumed crawl's own User-Agent, not
    # the one the stopped crawl's middlewares had added.
    assert [hit.user_agent for hit in site.hits] == ["TestBot/1.0", "TestBot/2.0"]


#: scrapy-redis's own queue, from which a request waits in the gate, and the add-on's
#: shared queue (its default with scrapy-redis, through ``REDIS_URL``), which keeps a
#: request in Redis until its unit is ready, with and without the reactor.
REDIS_QUEUES = {
    "scrapy-redis-queue": {"FLEET_REDIS_URL": False},
    "shared-queue": {},
}
if WITHOUT_REACTOR:
    REDIS_QUEUES["shared-queue-no-reactor"] = MODES["no-reactor"]


@pytest.mark.parametrize("queue", list(REDIS_QUEUES))
def test_sigterm_is_prompt_and_a_scrapy_redis_queue_keeps_what_waited(
    site, tmp_path, redis_server, queue
):
    from scrapy_rfc9309.robots import RedisRobotsStore

    url = redis_server.url.rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(url).flushdb()
    site.route("/robots.txt", body=ROBOTS)
    on_a_thread(RedisRobotsStore(url, 512_000), site.url, ROBOTS)  # the fleet's copy
    urls = [f"{site.url}/p/0", f"{site.url}/p/1"]
    settings = settings_for(
        tmp_path,
        site,
        SCHEDULER="scrapy_redis.scheduler.Scheduler",
        DUPEFILTER_CLASS="scrapy_redis.dupefilter.RFPDupeFilter",
        SCHEDULER_PERSIST=True,
        REDIS_URL=url,
        **REDIS_QUEUES[queue],
    )
    took, _ = stop_while_waiting(site, settings, urls)
    assert took < PROMPT
    assert len(pages(site)) == 1  # the first of the queue's order (LIFO in the shared one)
    stats = resume({**settings, "USER_AGENT": "TestBot/2.0"}, urls)
    assert stats["test/twisted_reactor"] is REDIS_QUEUES[queue].get("TWISTED_REACTOR_ENABLED", True)
    assert sorted(pages(site)) == ["/p/0", "/p/1"]
    hits = [hit for hit in site.hits if hit.path.startswith("/p/")]
    assert [hit.user_agent for hit in hits] == ["TestBot/1.0", "TestBot/2.0"]
    assert "/robots.txt" not in site.paths()  # the kept copy, both times
    if queue != "scrapy-redis-queue":  # the unit's next start is kept in Redis
        assert hits[1].time - hits[0].time >= CRAWL_DELAY


@pytest.mark.parametrize("mode", list(MODES))
def test_closespider_timeout_is_prompt_while_requests_wait(site, tmp_path, mode):
    site.route("/robots.txt", body=ROBOTS)
    urls = [f"{site.url}/p/0", f"{site.url}/p/1"]
    settings = settings_for(tmp_path, site, CLOSESPIDER_TIMEOUT=2, **MODES[mode])
    began = time.monotonic()
    stats = resume(settings, urls)
    assert time.monotonic() - began < PROMPT  # 2 s, then the stop, not the 20 s wait
    assert stats["finish_reason"] == "closespider_timeout"
    assert stats["test/twisted_reactor"] is MODES[mode].get("TWISTED_REACTOR_ENABLED", True)
    assert pages(site) == ["/p/0"]


@pytest.mark.parametrize("mode", list(MODES))
def test_sigterm_is_prompt_while_a_host_is_held_and_its_robots_txt_has_expired(
    site, tmp_path, mode
):
    """A page answered 429 with ``Retry-After: 600`` holds its host; the next page
    finds the host's robots.txt expired (``RFC9309_CACHE_TTL = 0.5``).  A robots.txt
    request would wait in the downloader for the hold's end, and a stop with it
    (before: still running 60 s after SIGTERM, with Scrapy's queue): the expired copy
    is obeyed meanwhile (RFC 9309 §2.4), the page waits in the gate and goes back to
    the scheduler, and the stop is prompt.  The site sees nothing during the hold."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.route("/p/0", status=429, headers={"Retry-After": "600"}, delay=1.0)
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "RFC9309_CACHE_TTL": 0.5,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,  # /p/1 after /p/0's answer
        "JOBDIR": str(tmp_path / "job"),
        "LOG_LEVEL": "INFO",
        **MODES[mode],
    }
    # The 429 comes 1 s after the first page is asked: the hold begins, /p/1 waits.
    took, stats = stop_while_waiting(site, settings, [f"{site.url}/p/0", f"{site.url}/p/1"], 2.5)
    assert took < PROMPT
    assert stats["finish_reason"] == "shutdown"
    assert site.paths() == ["/robots.txt", "/p/0"]


@pytest.mark.parametrize("mode", list(MODES))
def test_sigterm_is_prompt_while_a_page_waits_for_a_robots_txt_its_held_unit_puts_off(
    site, other_site, tmp_path, mode
):
    """A 429 with ``Retry-After: 600`` holds the unit 127.0.0.1; a link then found
    leads to another authority of it (another port, as ``http://`` beside
    ``https://``; or another host of a domain unit) whose robots.txt was never read,
    so no copy may be obeyed meanwhile.  Its robots.txt request would wait in the
    downloader for the hold, and a stop with it (before: still running 60 s after
    SIGTERM, with Scrapy's queue): the page goes back to the scheduler instead, the
    stop is prompt, and the resumed crawl (``JOBDIR``) fetches it."""
    settings = {"JOBDIR": str(tmp_path / "job"), **MODES[mode]}
    stop_with_a_page_of_an_unread_authority_of_a_held_unit(site, other_site, settings)


def test_sigterm_is_prompt_while_a_page_waits_for_a_robots_txt_its_held_unit_puts_off_redis(
    site, other_site, redis_server
):
    """The same with scrapy-redis's queue (each process holding its own units,
    ``FLEET_REDIS_URL = False``): the page goes back to Redis, which keeps it for
    the next crawl."""
    url = redis_server.url.rsplit("/", 1)[0] + "/8"
    redis.Redis.from_url(url).flushdb()
    settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "REDIS_URL": url,
        **REDIS_QUEUES["scrapy-redis-queue"],
    }
    stop_with_a_page_of_an_unread_authority_of_a_held_unit(site, other_site, settings)


def stop_with_a_page_of_an_unread_authority_of_a_held_unit(
    site, other_site, settings, hold_in=1.0, link_in=2.0
):
    """The 429 comes *hold_in* seconds after the first page is asked, the link
    *link_in* seconds after it is asked."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/0", Route(status=429, headers={"Retry-After": "600"}, delay=hold_in))
    site.route("/links", body=f'<a href="{other_site.url}/p/1">1</a>'.encode(), delay=link_in)
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "LOG_LEVEL": "INFO",
        **settings,
    }
    urls = [f"{site.url}/p/0", f"{site.url}/links"]
    took, stats = stop_while_waiting(site, settings, urls, max(hold_in, link_in) + 2, "--follow")
    assert took < PROMPT
    assert stats["finish_reason"] == "shutdown"
    assert other_site.paths() == []  # nothing during the hold
    resume(settings, urls, "--follow")
    assert other_site.paths() == ["/robots.txt", "/p/1"]


def test_sigterm_is_prompt_when_the_fleet_holds_a_unit_whose_read_waits_for_a_place(
    site, other_site, redis_server
):
    """The package's queue reads robots.txt ahead, one at a time here
    (``CONCURRENT_REQUESTS = 2``): localhost's read (its robots.txt answered in 3 s)
    takes the place, and 127.0.0.1's waits for it.  Meanwhile another process of the
    fleet is told to hold 127.0.0.1 (a 429 with ``Retry-After: 600``), and this one
    learns it from Redis.  Once the place is free, 127.0.0.1's read waits for the
    hold in the queue, not in the downloader, where a stop would wait for it (before:
    still running 60 s after SIGTERM).  The site sees nothing during the hold."""
    from scrapy_rfc9309.fleet.spacing import FleetSpacing

    url = redis_server.url.rsplit("/", 1)[0] + "/9"
    redis.Redis.from_url(url).flushdb()
    other_site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n", delay=3.0)
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "FLEET_REDIS_URL": url,
        "CONCURRENT_REQUESTS": 2,
        "LOG_LEVEL": "INFO",
    }
    crawl = start(settings, [f"http://localhost:{other_site.port}/p/0", f"{site.url}/p/1"])
    # The place is taken for 3 s from then.
    wait_until(crawl, lambda: "/robots.txt" in other_site.paths(), "localhost's robots.txt")

    async def hold() -> None:
        spacing = FleetSpacing(url)
        try:
            await spacing.hold("127.0.0.1", 600)
        finally:
            spacing.close()

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, hold()).result()
    # The place is free again.
    wait_until(crawl, lambda: "/p/0" in other_site.paths(), "localhost's page")
    time.sleep(1.0)
    took, _, stderr = terminate(crawl)
    assert took < PROMPT, stderr[-3000:]
    assert site.paths() == []


#: The modes with Scrapy's queue, which hands a floored unit's second page out while
#: the first is on the wire (the package's keeps it until the unit is ready).
SCRAPYS_QUEUE_MODES = [mode for mode in MODES if mode.endswith("scrapys-queue")]


@pytest.mark.parametrize("mode", SCRAPYS_QUEUE_MODES)
def test_sigterm_is_prompt_when_a_unit_is_held_while_a_robots_txt_request_waits_for_it(
    site, other_site, tmp_path, mode
):
    """As above, but the link comes first (0.5 s), while the first page is on the
    wire (3 s), and its robots.txt request waits in the gate for that page's end,
    which brings the 429 (``Retry-After: 600``).  It is put off, as it would have
    been had the hold come first: the page goes back to the scheduler, the stop is
    prompt (before: still running 60 s after SIGTERM), and the resumed crawl
    fetches it."""
    settings = {"JOBDIR": str(tmp_path / "job"), **MODES[mode]}
    stop_with_a_page_of_an_unread_authority_of_a_held_unit(
        site, other_site, settings, hold_in=3.0, link_in=0.5
    )


@pytest.mark.parametrize("mode", SCRAPYS_QUEUE_MODES)
def test_sigterm_is_prompt_while_a_robots_txt_fetch_would_wait_for_a_floor_learnt_meanwhile(
    site, other_site, mode
):
    """A page of each of two authorities of 127.0.0.1 (as ``http://`` and
    ``https://``), the first's robots.txt redirected to the second's
    (``Crawl-delay: 20``).  The second's own fetch waits in the gate while the first
    reads that file, then would wait the 20 s it learnt: it is put off, as it would
    not have been sent had that been known, its page goes back to the scheduler, and
    a stop is prompt (before: 18 s after SIGTERM).  The site sees the file once (see
    also test_robots_liveness.py)."""
    site.route("/robots.txt", status=301, headers={"Location": f"{other_site.url}/robots.txt"})
    other_site.route("/robots.txt", body=ROBOTS)
    settings = {"ADDONS": {"scrapy_rfc9309.Addon": 500}, "ROBOTSTXT_OBEY": True, **MODES[mode]}
    crawl = start(settings, [f"{site.url}/p/0", f"{other_site.url}/p/1"])
    wait_until(crawl, lambda: "/robots.txt" in other_site.paths(), "the robots.txt")
    time.sleep(2.0)
    took, _, stderr = terminate(crawl)
    assert took < PROMPT, stderr[-3000:]
    assert other_site.paths() == ["/robots.txt"]
    assert pages(site) == []  # the Crawl-delay from the file's end


def redirected_on_its_own_host(site, other_site, tmp_path, delay, **extra):
    """The settings and start URLs of a crawl in which 127.0.0.1's Crawl-delay
    (*delay*) is known before its robots.txt, redirected on its own host
    (``/robots.txt`` -> ``/robots-real.txt``), is fetched: a kept copy of another
    port's, which refuses that port's page, is read while the first hop is on the
    wire (1 s).  The next hop is due *delay* after the first."""
    kept = tmp_path / "robots.sqlite"
    body = f"User-agent: *\nCrawl-delay: {delay}\nDisallow: /\n".encode()
    on_a_thread(SQLiteRobotsStore(kept, 512_000, time.time), other_site.url, body)
    site.route("/robots.txt", status=301, headers={"Location": "/robots-real.txt"}, delay=1.0)
    site.route("/robots-real.txt", body=f"User-agent: *\nCrawl-delay: {delay}\n".encode())
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "RFC9309_PERSISTENT_CACHE_PATH": str(kept),
        "LOG_LEVEL": "INFO",
        **extra,
    }
    return settings, [f"{other_site.url}/p/9", f"{site.url}/p/0"]


@pytest.mark.parametrize("mode", list(MODES))
def test_sigterm_is_prompt_while_a_robots_txt_redirect_waits_for_its_next_hop(
    site, other_site, tmp_path, mode
):
    """127.0.0.1's robots.txt is redirected on its own host, its Crawl-delay (20) known:
    the redirect's next hop would wait the 20 s in the downloader, and a stop with it
    (before: 19 s after SIGTERM, with Scrapy's queue).  It is put off, the page goes
    back to the scheduler, and the stop is prompt."""
    settings, urls = redirected_on_its_own_host(site, other_site, tmp_path, 20, **MODES[mode])
    crawl = start(settings, urls)
    wait_until(crawl, lambda: "/robots.txt" in site.paths(), "the first hop")
    time.sleep(2.0)
    took, _, stderr = terminate(crawl)
    assert took < PROMPT, stderr[-3000:]
    assert site.paths() == ["/robots.txt"]
    assert other_site.paths() == []


@pytest.mark.parametrize("mode", ["package-queue", *SCRAPYS_QUEUE_MODES])
def test_a_robots_txt_fetch_put_off_at_a_redirects_next_hop_goes_on_from_it(
    site, other_site, tmp_path, mode
):
    """The same with ``Crawl-delay: 6``, to the end: the fetch put off at its next hop
    goes on from that hop a Crawl-delay after the first (started again from its
    first request, it would meet the same wait at the same hop, and never read the
    file); the page is fetched a Crawl-delay later."""
    settings, urls = redirected_on_its_own_host(site, other_site, tmp_path, 6, **MODES[mode])
    stats = resume(settings, urls)
    assert stats["crawldelay/robots_put_off"] == 1
    assert site.paths() == ["/robots.txt", "/robots-real.txt", "/p/0"]
    starts = [hit.time for hit in site.hits]
    assert starts[1] - starts[0] >= 6 + 1  # the first hop's answer took 1 s
    assert starts[2] - starts[1] >= 6


def test_a_fleets_robots_txt_fetch_put_off_by_a_hold_lets_its_lock_go(
    site, other_site, redis_server
):
    """The same in a fleet (Scrapy's queue, ``FLEET_REDIS_URL``): the process that
    took the other port's robots.txt lock lets it go when the fetch is put off, so
    that no process waits for a fetch that is not coming.  (The hold is the fleet's,
    kept in Redis: a resumed crawl would wait for it.)"""
    url = redis_server.url.rsplit("/", 1)[0] + "/10"
    server = redis.Redis.from_url(url)
    server.flushdb()
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.answer_first("/p/0", Route(status=429, headers={"Retry-After": "600"}, delay=3.0))
    site.route("/links", body=f'<a href="{other_site.url}/p/1">1</a>'.encode(), delay=0.5)
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "FLEET_REDIS_URL": url,
        "LOG_LEVEL": "INFO",
        **MODES["scrapys-queue"],
    }
    urls = [f"{site.url}/p/0", f"{site.url}/links"]
    took, stats = stop_while_waiting(site, settings, urls, 5.0, "--follow")
    assert took < PROMPT
    assert other_site.paths() == []
    assert stats["rfc9309/handed_back"] >= 1
    assert server.keys("*:lock:*") == []


@pytest.mark.parametrize("mode", SCRAPYS_QUEUE_MODES)
def test_sigterm_is_prompt_while_a_page_is_on_the_wire_and_its_robots_txt_has_expired(
    site, tmp_path, mode
):
    """The site's kept robots.txt (``Crawl-delay: 20``) expires 4.5 s in while its
    first page is on the wire (8 s): with Scrapy's queue the second page, back from
    the gate after its 5 s, finds it expired.  A robots.txt request would wait for
    that page's end and then the 20 s, and a stop with it (before: 22 s after
    SIGTERM, with Scrapy's queue): the expired copy is obeyed meanwhile, and the
    stop is prompt."""
    site.route("/p/0", body=b"page", delay=8.0)
    settings = settings_for(tmp_path, site, RFC9309_CACHE_TTL=4.5, **MODES[mode])
    took, stats = stop_while_waiting(site, settings, [f"{site.url}/p/0", f"{site.url}/p/1"], 6.0)
    assert took < PROMPT
    assert stats["finish_reason"] == "shutdown"
    assert site.paths() == ["/p/0"]


def test_a_page_the_fleets_redis_keeps_waiting_goes_back_and_a_stop_is_prompt(site, redis_server):
    """Another process holds the site's unit in the fleet's Redis (its request on the
    wire, a lease of 120 s): Redis tells this process to ask again every Crawl-delay
    (0.3 s), not when the unit will be free.  The page goes back to the scheduler
    after its 5 s rather than poll until the lease ends, so ``CLOSESPIDER_TIMEOUT =
    2`` ends the crawl within 30 s (before: the lease's 120 s)."""
    from scrapy_rfc9309.robots import RedisRobotsStore

    url = redis_server.url.rsplit("/", 1)[0] + "/8"
    redis.Redis.from_url(url).flushdb()
    robots = b"User-agent: *\nCrawl-delay: 0.3\n"
    site.route("/robots.txt", body=robots)
    on_a_thread(RedisRobotsStore(url, 512_000), site.url, robots)  # kept: no fetch
    hold_elsewhere(url, 0.3, 120)
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": "TestBot/1.0",
        "FLEET_REDIS_URL": url,
        "CLOSESPIDER_TIMEOUT": 2,
        "LOG_LEVEL": "INFO",
    }
    began = time.monotonic()
    stats = resume(settings, [f"{site.url}/p/0"])
    assert time.monotonic() - began < 30
    assert stats["finish_reason"] == "closespider_timeout"
    assert stats["crawldelay/handed_back"] >= 1
    assert site.paths() == []  # neither robots.txt (kept) nor the page (held)


#: The modes whose requests wait for the fleet's Redis in the gate: the package's
#: queue, without the reactor, and scrapy-redis's own queue (the add-on's shared
#: queue keeps a request in Redis until its unit is ready instead).
GATE_FLEET_MODES = {
    "package-queue": lambda url: {"FLEET_REDIS_URL": url},
    "scrapy-redis-queue": lambda url: {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
        "REDIS_URL": url,
    },
}
if WITHOUT_REACTOR:
    GATE_FLEET_MODES["no-reactor"] = lambda url: {
        "FLEET_REDIS_URL": url,
        "TWISTED_REACTOR_ENABLED": False,
    }


@pytest.mark.parametrize("mode", list(GATE_FLEET_MODES))
def test_a_page_whose_budget_is_spent_waits_for_no_other_process_of_the_fleet(
    site, redis_server, mode
):
    """Another process holds the site's unit in the fleet's Redis (a lease of 60 s),
    and the page's domain has spent its day's budget in the fleet's store (the other
    processes spent it): the page is dropped when Redis first says to wait, not
    handed back every 5 s until the lease ends and dropped then.  This process sent
    the unit nothing yet, so only the fleet's Redis says wait; no robots.txt here
    (its fetch would ask the budget first), a ``DOWNLOAD_DELAY`` is the floor."""
    from scrapy_rfc9309.budget.policy import day_of
    from scrapy_rfc9309.budget.storage import RedisStorage

    url = redis_server.url.rsplit("/", 1)[0] + "/9"
    redis.Redis.from_url(url).flushdb()
    store = RedisStorage(url)  # the other processes spent the day's one request
    store.reserve("127.0.0.1", day_of(time.time(), ZoneInfo("UTC")), 1, 0)
    store.close()
    hold_elsewhere(url, 2, 60)
    stats = resume(
        {
            "ADDONS": {"scrapy_rfc9309.Addon": 500},
            "USER_AGENT": "TestBot/1.0",
            "DOWNLOAD_DELAY": 2,
            "DOMAINBUDGET_ENABLED": True,
            "DOMAINBUDGET_STORAGE": "scrapy_rfc9309.budget.storage.RedisStorage",
            "DOMAINBUDGET_REDIS_URL": url,
            "DOMAINBUDGET_POLICY": {"default_policy": {"max_requests_per_day": 1}},
            "LOG_LEVEL": "INFO",
            **GATE_FLEET_MODES[mode](url),
        },
        [f"{site.url}/p/0"],
    )
    assert stats["test/twisted_reactor"] is (mode != "no-reactor")
    assert stats["domainbudget/dropped/max_requests_per_day"] == 1
    assert "crawldelay/handed_back" not in stats  # it waited for no one (before: the lease)
    assert site.paths() == []
