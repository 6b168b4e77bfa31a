"""A fleet: three crawler processes with scrapy-redis's scheduler and dupefilter and one
real redis-server, against one local site.  What the site saw must be what one polite
process would have sent: every gap between page requests at least the Crawl-delay,
pages = the shared budget, robots.txt fetched once for the fleet and spaced with the
pages."""

import asyncio
import itertools
import json
import signal
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from time import monotonic

import pytest
import pytest_twisted
import redis
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_rfc9309._settings import ROBOTS_DEFAULTS, RobotsSettings, with_defaults
from scrapy_rfc9309.downloadermiddlewares.robotstxt._fetch import Fetched
from scrapy_rfc9309.downloadermiddlewares.robotstxt._fleet import SharedRobotsFetcher
from scrapy_rfc9309.fleet import authority_key
from scrapy_rfc9309.fleet.robots import SharedFetch, SharedRobots
from scrapy_rfc9309.robots import FetchOutcome, RedisRobotsStore, RobotsTxt
from tests.broad_site import BroadSite, addresses, robots_and_pages
from tests.delay_proxy import DelayProxy
from tests.helpers import WITHOUT_REACTOR, on_loop
from tests.processes import crawl_process, run_crawl
from tests.server import Route

ROOT = Path(__file__).resolve().parents[2]
CRAWL_DELAY = 0.5
#: A test run with Twisted's reactor and without it (``reactor``: whether with it).
with_and_without_the_reactor = pytest.mark.parametrize(
    "reactor",
    [True, False] if WITHOUT_REACTOR else [True],
    ids=lambda reactor: "reactor" if reactor else "no-reactor",
)


def fleet_settings(redis_url, **extra):
    return {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": "TestBot/1.0",
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,  # else the first process to close deletes the queue
        # scrapy-redis's own queue, unless a test names another (the add-on's default
        # with scrapy-redis is the host-ready queue: see the polite-by-default test).
        "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
        "REDIS_URL": redis_url,
        "FLEET_REDIS_URL": redis_url,
        "DOMAINBUDGET_ENABLED": True,
        "DOMAINBUDGET_STORAGE": "scrapy_rfc9309.budget.storage.RedisStorage",
        "DOMAINBUDGET_REDIS_URL": redis_url,
        "CONCURRENT_REQUESTS": 8,
        "REDIS_START_URLS_BATCH_SIZE": 2,  # spread the start URLs over the processes
        "LOG_LEVEL": "WARNING",
        **extra,
    }


def start_fleet(settings, urls, processes=3, cwd=ROOT):
    """*processes* crawls, run in *cwd* (the project's directory: its ``.scrapy`` is
    theirs); process i sends ``User-Agent: TestBot/1.0 (i)``.  With
    scrapy-redis's scheduler, *urls* go to the fleet's start list (scrapy-redis's
    RedisSpider) once every process is up (one that starts late on a loaded machine
    would otherwise find the crawl over, or close idle before the first pushes);
    else each process crawls them all."""
    mode = "--redis-spider" if "SCHEDULER" in settings else "--dedupe"
    fleet = [
        crawl_process(
            mode,
            json.dumps({**settings, "USER_AGENT": f"TestBot/1.0 ({number})"}),
            *(urls if mode == "--dedupe" else []),
            cwd=cwd,
        )
        for number in range(processes)
    ]
    if mode == "--redis-spider":
        server = redis.Redis.from_url(settings["REDIS_URL"])
        deadline = time.monotonic() + 60
        while int(server.get("pages:ready") or 0) < processes:
            assert time.monotonic() < deadline and all(p.poll() is None for p in fleet), [
                p.communicate()[1][-2000:] for p in fleet if p.poll() is not None
            ]
            time.sleep(0.05)
        if urls:
            server.rpush("pages:start_urls", *(json.dumps({"url": url}) for url in urls))
        server.set("pages:started", 1)
    return fleet


def wait_all(fleet, timeout=120, logs=None):
    """Each process's stats; with a *logs* list, their logs are appended to it."""
    deadline = time.monotonic() + timeout
    outputs = []
    try:
        for process in fleet:
            try:
                stdout, stderr = process.communicate(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:  # the stuck process's threads, then its log
                process.send_signal(signal.SIGUSR1)
                time.sleep(1)
                process.kill()
                raise AssertionError(process.communicate()[1][-6000:]) from None
            assert process.returncode == 0, stderr[-3000:]
            outputs.append(json.loads(stdout.strip().splitlines()[-1]))
            if logs is not None:
                logs.append(stderr)
    finally:  # a failed test leaves no crawl running
        for process in fleet:
            if process.poll() is None:
                process.kill()
                process.wait()
    return outputs


def wait_for_pages(site, count, timeout=60):
    deadline = time.monotonic() + timeout
    while sum(hit.path.startswith("/p/") for hit in site.hits) < count:
        assert time.monotonic() < deadline, site.paths()
        time.sleep(0.05)


def page_gaps(site, robots_too=False):
    """The gaps between consecutive page requests (and robots.txt, with *robots_too*)
    as the site saw them."""
    times = sorted(hit.time for hit in site.hits if hit.path.startswith("/p/") or robots_too)
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def seeded_sites(hosts, first, pages, delay, on_page):
    """*hosts* sites on 127.0.x.y (from the *first* address) with ``Crawl-delay:
    delay``, *pages* pages each (``/p/{n}``, 50 ms each, *on_page* called with the
    host, path and headers of each), all linked from the first host's ``/seed``."""

    def respond(host, path, headers):
        if path == "/robots.txt":
            return 200, {}, f"User-agent: *\nCrawl-delay: {delay}\n".encode()
        body = ""
        if path == "/seed":
            links = (site.url(each, f"/p/{n}") for n in range(pages) for each in site.hosts)
            body = "".join(f'<a href="{link}">.</a>' for link in links)
        else:
            on_page(host, path, headers)
        return 200, {"Content-Type": "text/html"}, f"<html><body>{body}</body></html>".encode()

    site = BroadSite(addresses(hosts, first=first), respond, page_time=0.05)
    return site


def seed_slow_and_fast(site, other_site, crawl_delay, slow, fast, disallowed=0):
    """A seed page on *other_site* linking *disallowed* pages of *site* that its
    robots.txt disallows, *slow* pages of *site* (Crawl-delay *crawl_delay*), then
    *fast* pages of *other_site* (no delay, another slot: Scrapy's slots are per host
    name); returns the seed's URL."""
    robots = f"User-agent: *\nCrawl-delay: {crawl_delay}\nDisallow: /private\n"
    site.route("/robots.txt", body=robots.encode())
    other_site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    other_url = other_site.url.replace("127.0.0.1", "localhost")
    urls = [f"{site.url}/private/{i}" for i in range(disallowed)]
    urls += [f"{site.url}/p/{i}" for i in range(slow)]
    urls += [f"{other_url}/p/{i}" for i in range(fast)]
    links = "".join(f'<a href="{url}">.</a>' for url in urls).encode()
    other_site.route("/seed", body=b"<html><body>" + links + b"</body></html>")
    return f"{other_url}/seed"


def test_three_processes_keep_the_crawl_delay_and_the_budget_as_one(site, fleet_redis):
    site.route(
        "/robots.txt",
        body=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\nDisallow: /private/\n".encode(),
    )
    urls = [f"{site.url}/p/{i}" for i in range(30)] + [f"{site.url}/private/x"]
    stats = wait_all(
        start_fleet(
            fleet_settings(
                fleet_redis,
                DOMAINBUDGET_POLICY={
                    "default_policy": {"max_requests_per_day": 0, "max_pages_per_day": 10}
                },
            ),
            urls,
        )
    )
    pages = [hit.path for hit in site.hits if hit.path.startswith("/p/")]
    assert len(pages) == 10 and len(set(pages)) == 10  # the budget, each page once
    assert "/private/x" not in site.paths()
    assert site.count("/robots.txt") == 1  # one fetch for the fleet
    assert sum(s.get("fleet/robots_fetched", 0) for s in stats) == 1
    # The others read it: the fleet's copy, or the one it keeps across restarts, and
    # the close report says it came from this run, not an earlier crawl.
    read = ("fleet/robots_shared", "rfc9309/this_run_hit")
    assert sum(s.get(name, 0) for s in stats for name in read) >= 1
    assert sum(s.get("rfc9309/persistent_hit", 0) for s in stats) == 0
    # One copy in Redis: the one kept across restarts (locks let go of).
    stored = redis.Redis.from_url(fleet_redis).keys("rfc9309:robots*")
    assert stored == [f"rfc9309:robots-kept:{{127.0.0.1}}:{site.url}".encode()]
    # End to start, robots.txt included, whichever process sent either request.
    gaps = page_gaps(site, robots_too=True)
    assert min(gaps) >= CRAWL_DELAY, gaps
    assert sum(s.get("fleet/spacing_acquired", 0) for s in stats) >= 10


@pytest.mark.parametrize(
    "queue",
    [None, "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"],
    ids=["scrapy-redis-queue", "host-ready-queue"],
)
def test_three_processes_over_200_hosts_keep_every_hosts_crawl_delay_robots_txt_included(
    fleet_redis, queue
):
    """The fleet in a broad crawl: 200 hosts on 127.0.x.y, each with a Crawl-delay,
    robots.txt fetched by whichever process comes first and pages by any: on every
    host's own clock, no two requests closer than the Crawl-delay; each robots.txt
    fetched once; never more pages in progress at the sites than the three processes'
    places.  Redis is a network hop away (a proxy adding 1 ms a round trip: on the
    loopback alone, fewer races show); with scrapy-redis's queue and with the
    package's shared queue, whose hosts have owners."""
    hosts, pages = 200, 2
    port = int(fleet_redis.rsplit(":", 1)[1].split("/")[0])
    proxy = DelayProxy(("127.0.0.1", port), rtt=0.001)
    fleet_redis = f"redis://127.0.0.1:{proxy.port}/5"

    respond = robots_and_pages(f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n")
    site = BroadSite(addresses(hosts, first=600), respond, page_time=0.05)
    try:
        # A host's pages side by side in the fleet's queue: processes popping at once
        # take pages of one host, and one of them fetches its robots.txt.
        urls = [site.url(host, f"/p/{n}") for host in site.hosts for n in range(pages)]
        settings = fleet_settings(
            fleet_redis,
            DOMAINBUDGET_ENABLED=False,
            CONCURRENT_REQUESTS=16,
            REDIS_START_URLS_BATCH_SIZE=30,
            **({"SCHEDULER_QUEUE_CLASS": queue} if queue else {}),
        )
        stats = wait_all(start_fleet(settings, urls))
    finally:
        site.close()
    gaps = site.gaps()
    assert len(gaps) == hosts * pages  # robots.txt once per host, then its pages
    short = sorted(gap for gap in gaps if gap[0] < CRAWL_DELAY)
    assert short == [], f"{len(short)} of {len(gaps)} gaps short, shortest {short[:3]}"
    assert sum(s.get("fleet/robots_fetched", 0) for s in stats) == hosts
    assert site.most_pages <= 3 * 16


@pytest_twisted.ensureDeferred
async def test_a_copy_published_while_a_process_waits_for_the_lock_is_used_not_fetched_again(
    fleet_redis,
):
    """Process A holds the lock; process B finds no copy and waits; A publishes its
    copy and lets go of the lock.  B must use A's copy, not take the free lock and
    fetch again (the broad fleet crawl above once met this: two fetches of one
    robots.txt, 10 ms apart): B reads and locks in one atomic call."""
    crawler = get_crawler(settings_dict={"FLEET_REDIS_URL": fleet_redis})
    config = RobotsSettings.from_settings(with_defaults(crawler.settings, ROBOTS_DEFAULTS))

    class Site:
        config = None
        fetches = 0

        async def fetch(self, authority, previous=None, revalidate=None, route=None):
            Site.fetches += 1
            raise AssertionError("fetched although the fleet had a copy")

    site = Site()
    site.config = config
    fetcher = SharedRobotsFetcher(crawler, site, fleet_redis)
    process_a = SharedRobots(fleet_redis)
    authority = "http://a.example"
    read_or_lock = fetcher.shared.read_or_lock
    reads = []

    async def a_publishes_after_bs_first_read(key, seconds, other_key=None, token=None):
        found = await read_or_lock(key, seconds, other_key, token)
        reads.append(found)
        if len(reads) == 1:
            body = b"User-agent: *\nDisallow: /x\n"
            await process_a.publish(key, SharedFetch("success", 200, body, 60), a_token)
        return found

    fetcher.shared.read_or_lock = a_publishes_after_bs_first_read

    async def scenario():
        nonlocal a_token
        try:
            _, _, a_token = await process_a.read_or_lock(authority, 5)
            return await fetcher.fetch(authority)
        finally:
            await fetcher.close()
            process_a.close()

    a_token = None
    fetched = await on_loop(scenario())
    assert Site.fetches == 0
    assert reads[0] == (None, None, None)  # no copy, the lock A's
    assert not fetched.entry.check(f"{authority}/x", "TestBot").allowed
    assert crawler.stats.get_value("fleet/robots_shared") == 1
    left = redis.Redis.from_url(fleet_redis).exists(
        f"rfc9309:robots:lock:{{127.0.0.1}}:{authority}"
    )
    assert left == 0  # A let go of it, and B took none


@pytest_twisted.ensureDeferred
async def test_a_robots_txt_lock_redis_took_for_a_call_that_failed_is_let_go_of_once_it_answers(
    fleet_redis, monkeypatch
):
    """Two ways a process may hold a robots.txt lock it cannot let go of: Redis ran
    its read-and-lock after the call gave up (the process fetched by itself), and
    Redis stopped answering before the process published what it fetched.  Each lock
    is let go of with its token once Redis answers, not left to expire (the fetch's
    timeout and a margin, while every other process waits for that robots.txt)."""
    from scrapy_rfc9309.fleet import health

    monkeypatch.setattr(health, "RETRY_AFTER", 0.1)  # the pause after a failure
    crawler = get_crawler(settings_dict={"FLEET_REDIS_URL": fleet_redis})
    config = RobotsSettings.from_settings(with_defaults(crawler.settings, ROBOTS_DEFAULTS))
    server = redis.Redis.from_url(fleet_redis)
    port, db = server.connection_pool.connection_kwargs["port"], fleet_redis.rsplit("/", 1)[1]
    proxy = DelayProxy(("127.0.0.1", port), rtt=0)
    body = b"User-agent: *\nDisallow: /x\n"

    class Site:
        def __init__(self):
            self.config = config

        async def fetch(self, authority, previous=None, revalidate=None, route=None):
            if authority == authorities[1]:
                proxy.delay = None  # the publish does not reach Redis
            entry = config.policy.success(RobotsTxt.parse(body), monotonic(), 200)
            return Fetched(entry, authority, Request(authority), body=body)

    fetcher = SharedRobotsFetcher(crawler, Site(), f"redis://127.0.0.1:{proxy.port}/{db}")
    authorities = ("http://late.example", "http://published.example")
    locks = [authority_key("rfc9309:robots:lock", authority) for authority in authorities]

    async def scenario():
        try:
            await fetcher.fetch("http://warm.example")  # Redis has the ledger's script
            proxy.delay = 1.5  # Redis locks at 1.5 s; the call gave up at 2 s
            await fetcher.fetch(authorities[0])  # fetched here
            proxy.delay = 0
            held = [server.exists(locks[0])]
            await asyncio.sleep(0.3)  # Redis may be called again
            await fetcher.fetch(authorities[1])  # locked, fetched, not published
            proxy.delay = 0
            held.append(server.exists(locks[1]))
            deadline = monotonic() + 5  # well before the locks expire (15 s)
            while any(server.exists(lock) for lock in locks) and monotonic() < deadline:
                await asyncio.sleep(0.05)
            return held, [server.exists(lock) for lock in locks]
        finally:
            await fetcher.close()

    held, left = await on_loop(scenario())
    assert held == [1, 1]
    assert left == [0, 0]
    assert crawler.stats.get_value("fleet/robots_error") == 2


@pytest_twisted.ensureDeferred
async def test_a_fleet_that_keeps_robots_txt_publishes_it_there_and_an_unreachable_one_apart(
    fleet_redis,
):
    """With the copy kept across restarts in the fleet's Redis, the fetching process
    writes it there, once, and the others read it there; an unreachable result, which
    is not kept, is published on its own key for the others."""
    crawler = get_crawler(settings_dict={"FLEET_REDIS_URL": fleet_redis})
    config = RobotsSettings.from_settings(with_defaults(crawler.settings, ROBOTS_DEFAULTS))
    body = b"User-agent: *\nDisallow: /x\n"

    class Site:
        fetches = 0

        def __init__(self):
            self.config = config

        async def fetch(self, authority, previous=None, revalidate=None, route=None):
            Site.fetches += 1
            if "down" in authority:
                entry = config.policy.unreachable(monotonic(), None, None)
                return Fetched(entry, authority, Request(authority))
            entry = config.policy.success(RobotsTxt.parse(body), monotonic(), 200)
            return Fetched(entry, authority, Request(authority), body=body)

    def process():
        kept = RedisRobotsStore(fleet_redis, config.max_bytes)
        return SharedRobotsFetcher(crawler, Site(), fleet_redis, kept), kept

    async def scenario():
        (a, a_kept), (b, b_kept) = process(), process()
        try:
            fetched = [await a.fetch(authority) for authority in ("http://up", "http://down")]
            read = [await b.fetch(authority) for authority in ("http://up", "http://down")]
            return fetched, read
        finally:
            for fetcher, kept in ((a, a_kept), (b, b_kept)):
                await fetcher.close()
                await kept.close()

    fetched, read = await on_loop(scenario())
    assert Site.fetches == 2  # each once, by process A
    assert [f.kept for f in fetched] == [True, False]  # not written again by the kept layer
    assert not read[0].entry.check("http://up/x", "TestBot").allowed
    assert read[1].entry.outcome is FetchOutcome.UNREACHABLE
    assert sorted(redis.Redis.from_url(fleet_redis).keys("rfc9309:robots*")) == [
        b"rfc9309:robots-kept:{up}:http://up",
        b"rfc9309:robots:{down}:http://down",
    ]


def test_a_fleet_redis_stopped_and_restarted_mid_crawl_never_makes_it_less_polite(site):
    """Without the fleet's Redis each process falls back to its own floor and its own
    robots.txt fetch; the processes then behave as lone ones (the site may see
    them closer together than the Crawl-delay, but never a process faster than
    alone), and go back to fleet-wide spacing when Redis answers again."""
    from tests.budget.redis_server import RedisServer

    server = RedisServer()
    site.route("/robots.txt", body=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode())
    urls = [f"{site.url}/p/{i}" for i in range(20)]
    settings = fleet_settings(server.url, DOMAINBUDGET_ENABLED=False)
    settings["REDIS_URL"] = None  # the queue lives in each process: only the fleet Redis fails
    settings.pop("SCHEDULER"), settings.pop("DUPEFILTER_CLASS")
    fleet = start_fleet(settings, urls, processes=2)
    try:
        wait_for_pages(site, 4)  # spaced through Redis so far
        server.stop()
        down_from = len(site.hits)
        time.sleep(2)
        server.restart()
        up_from = len(site.hits)
        logs = []
        stats = wait_all(fleet, logs=logs)
    finally:
        server.stop()
    assert len(site.hits) > up_from > down_from  # pages went out while down and after
    for log in logs:  # one WARNING each way per process, whatever used Redis
        assert log.count("Fleet Redis unreachable") == 1, log[-3000:]
        assert log.count("Fleet Redis answers again") == 1, log[-3000:]
    for process_stats in stats:
        assert (
            process_stats.get("fleet/spacing_error", 0) >= 1
            or process_stats.get("fleet/spacing_local", 0) >= 1
        ), process_stats
    by_process = {}
    for hit in site.hits:
        if hit.path.startswith("/p/"):
            by_process.setdefault(hit.user_agent, []).append(hit.time)
    assert [len(times) for times in by_process.values()] == [20, 20]
    for times in by_process.values():  # each process alone: never faster than asked
        gaps = [b - a for a, b in itertools.pairwise(sorted(times))]
        assert min(gaps) >= 0.95 * CRAWL_DELAY, gaps
    assert sum(s.get("fleet/spacing_acquired", 0) for s in stats) >= 4  # before the stop


@pytest.mark.parametrize(
    "redis_params",
    [{}, {"redis_cls": "tests.crawl.RedisOfOwnConnections"}],
    ids=["redis-py", "own-connection-class"],
)
def test_a_scrapy_redis_fleet_is_polite_with_scrapy_redis_settings_only(
    site, fleet_redis, redis_params
):
    """No FLEET_REDIS_URL: the add-on shares politeness through scrapy-redis's own
    Redis (REDIS_URL), and hands requests out by readiness from it; also when the
    project's redis-py client uses a connection class of its own, which the shared
    queue cannot mirror with its asynchronous client: every call goes through
    redis-py then."""
    site.route("/robots.txt", body=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode())
    urls = [f"{site.url}/p/{i}" for i in range(12)]
    settings = fleet_settings(
        fleet_redis, DOMAINBUDGET_ENABLED=False, LOG_LEVEL="INFO", REDIS_PARAMS=redis_params
    )
    del settings["FLEET_REDIS_URL"], settings["SCHEDULER_QUEUE_CLASS"]
    logs: list[str] = []
    stats = wait_all(start_fleet(settings, urls), logs=logs)
    assert len(page_gaps(site)) == 11
    assert min(page_gaps(site, robots_too=True)) >= 0.95 * CRAWL_DELAY
    assert site.count("/robots.txt") == 1
    # Once the floor is known, each page's unit is held in the fleet's ledger by the
    # pop that took the page: the gates acquire only for robots.txt and the first
    # page (popped before the file was read).
    assert sum(s.get("fleet/acquired_by_pop", 0) for s in stats) >= 10
    assert sum(s.get("fleet/spacing_acquired", 0) for s in stats) <= 3
    for log in logs:
        assert "shared by the fleet through redis://127.0.0.1" in log
        assert "(scrapy-redis's Redis; FLEET_REDIS_URL = False keeps them per process)" in log
        assert "queue: scrapy_rfc9309.redisqueue.HostReadyRedisQueue" in log
        assert "scrapy_rfc9309.dupefilter.RedisDupeFilter lets them through" in log


def test_in_a_scrapy_redis_fleet_a_redirect_goes_before_the_pages_its_host_had_queued(
    site, fleet_redis
):
    """scrapy-redis's default queue hands requests out by priority, and so does the
    add-on's shared queue within a host: the redirect of a page of a Crawl-delay host
    (Scrapy raises its priority by 2) is the host's next request, before the pages
    queued before it, as the site sees them."""
    site.route("/robots.txt", body=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode())
    links = "".join(f'<a href="/p/{n}">.</a>' for n in range(1, 7))
    html = {"Content-Type": "text/html"}
    site.route("/seed", body=f"<html><body>{links}</body></html>".encode(), headers=html)
    site.route("/p/1", status=301, headers={"Location": f"{site.url}/moved"})
    settings = fleet_settings(fleet_redis, DOMAINBUDGET_ENABLED=False)
    del settings["FLEET_REDIS_URL"], settings["SCHEDULER_QUEUE_CLASS"]
    wait_all(start_fleet(settings, [f"{site.url}/seed"], processes=1))
    pages = [hit.path for hit in site.hits if hit.path != "/robots.txt"]
    assert pages[:3] == ["/seed", "/p/1", "/moved"], pages
    assert sorted(pages[3:]) == [f"/p/{n}" for n in range(2, 7)]


@with_and_without_the_reactor
def test_a_scrapy_redis_fleet_on_a_tls_redis_is_polite_with_its_tls_options(
    site, tls_redis, reactor
):
    """scrapy-redis's Redis over TLS, its certificate not checked
    (``?ssl_cert_reqs=none``, as hosted Redis services are often used): the add-on
    shares politeness through it with no other setting, its clients reaching it as
    redis-py does."""
    port, _ = tls_redis
    url = f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none"
    site.route("/robots.txt", body=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode())
    settings = fleet_settings(
        url, DOMAINBUDGET_ENABLED=False, LOG_LEVEL="INFO", TWISTED_REACTOR_ENABLED=reactor
    )
    del settings["FLEET_REDIS_URL"], settings["SCHEDULER_QUEUE_CLASS"]
    logs: list[str] = []
    stats = wait_all(start_fleet(settings, [f"{site.url}/p/{i}" for i in range(6)], 2), logs=logs)
    assert len(page_gaps(site)) == 5
    assert min(page_gaps(site, robots_too=True)) >= 0.95 * CRAWL_DELAY
    assert site.count("/robots.txt") == 1
    assert sum(s.get("fleet/acquired_by_pop", 0) for s in stats) >= 4
    assert all(s["test/twisted_reactor"] is reactor for s in stats)
    for log in logs:
        assert f"shared by the fleet through rediss://127.0.0.1:{port}/0" in log
        assert "cannot reach" not in log and "ERROR" not in log


@with_and_without_the_reactor
def test_a_redis_spider_reads_its_next_start_urls_while_its_hosts_wait_for_their_floors(
    fleet_redis, reactor
):
    """scrapy-redis's RedisSpider reads its start URLs only when its engine is idle,
    here two at a time (one host's two pages).  12 hosts with a Crawl-delay of 3 s:
    while the first hosts' second pages wait in the shared queue for their floors,
    the process reads the next start URLs, and every host's robots.txt comes before
    the first second page.  (Counting the waiting pages as work, the process read
    no more start URLs until the queue was empty: the hosts went in waves, each
    waiting for the last to end.)  The waiting pages also keep the process open past
    its 2 idle seconds (``MAX_IDLE_TIME_BEFORE_CLOSE``): every page is fetched."""
    # The later hosts start while the first hosts' second pages wait: a window of one
    # Crawl-delay, wide enough for a loaded machine's pauses.
    delay, hosts = 3, 12

    respond = robots_and_pages(f"User-agent: *\nCrawl-delay: {delay}\n")
    site = BroadSite(addresses(hosts, first=1300), respond)
    try:
        urls = [site.url(host, f"/p/{n}") for host in site.hosts for n in range(2)]
        settings = fleet_settings(
            fleet_redis,
            DOMAINBUDGET_ENABLED=False,
            CONCURRENT_REQUESTS=16,
            TWISTED_REACTOR_ENABLED=reactor,
        )
        del settings["FLEET_REDIS_URL"], settings["SCHEDULER_QUEUE_CLASS"]
        wait_all(start_fleet(settings, urls, processes=1), timeout=60)
    finally:
        site.close()
    arrivals = [hit for hits in site.arrivals.values() for hit in hits]
    assert sorted(path for _, path in arrivals) == sorted(["/robots.txt", "/p/0", "/p/1"] * hosts)
    last_robots = max(time for time, path in arrivals if path == "/robots.txt")
    assert last_robots < min(time for time, path in arrivals if path == "/p/1")


def test_a_robots_txt_expiring_while_a_popped_page_holds_its_unit_is_fetched_at_once(
    site, fleet_redis
):
    """scrapy-redis's settings only (the shared queue on the fleet's Redis), robots.txt
    kept 1 s, Crawl-delay 0.3 s: a page popped with its unit held in the fleet's
    ledger finds the copy expired, and the fetch shares the page's hold instead of
    waiting for it (which would last the hold's lease, DOWNLOAD_TIMEOUT + 5 s)."""
    delay = 0.3
    site.route("/robots.txt", body=f"User-agent: *\nCrawl-delay: {delay}\n".encode())
    urls = [f"{site.url}/p/{i}" for i in range(16)]
    settings = fleet_settings(fleet_redis, DOMAINBUDGET_ENABLED=False, RFC9309_CACHE_TTL=1)
    del settings["FLEET_REDIS_URL"], settings["SCHEDULER_QUEUE_CLASS"]
    stats = wait_all(start_fleet(settings, urls, processes=2), timeout=60)
    pages = sorted(hit.path for hit in site.hits if hit.path.startswith("/p/"))
    assert pages == sorted(f"/p/{i}" for i in range(16))
    assert site.count("/robots.txt") >= 2  # it expired, and was fetched again
    assert sum(s.get("fleet/acquired_by_pop", 0) for s in stats) >= 8
    assert min(page_gaps(site, robots_too=True)) >= 0.95 * delay


def test_with_fleet_redis_url_false_each_process_keeps_the_delay_alone(site, fleet_redis):
    """The same fleet with FLEET_REDIS_URL = False: the site sees requests closer than
    its Crawl-delay (what sharing is for), and the log says why."""
    site.route("/robots.txt", body=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n".encode())
    urls = [f"{site.url}/p/{i}" for i in range(24)]
    # Two requests in hand a process: one process cannot take every page while the
    # others wait for their engine's heartbeat to pull start URLs.
    settings = fleet_settings(
        fleet_redis,
        FLEET_REDIS_URL=False,
        DOMAINBUDGET_ENABLED=False,
        CONCURRENT_REQUESTS=2,
        LOG_LEVEL="INFO",
    )
    logs: list[str] = []
    wait_all(start_fleet(settings, urls), logs=logs)
    assert min(page_gaps(site)) < 0.95 * CRAWL_DELAY
    assert all("FLEET_REDIS_URL = False: each process" in log for log in logs)


def test_a_slow_host_leaves_the_fleet_its_concurrency_for_a_fast_one(site, other_site, fleet_redis):
    """A Crawl-delay host and a no-delay host crawled by the fleet at once, two places
    per process, the slow host's pages first in the fleet's queue: they wait for
    their fleet-wide turns without holding the places, so the fast host's pages go
    while they wait, as they would without the slow host.  (Holding them, the three
    processes would take two slow pages each and wait a second for each one's turn.)"""
    seed = seed_slow_and_fast(site, other_site, 1, slow=7, fast=30)  # 7 fill every place
    settings = fleet_settings(
        fleet_redis,
        DOMAINBUDGET_ENABLED=False,
        CONCURRENT_REQUESTS=2,
        SCHEDULER_QUEUE_CLASS="scrapy_redis.queue.FifoQueue",
    )
    wait_all(start_fleet(settings, [seed]))
    slow_starts = sorted(hit.time for hit in site.hits if hit.path.startswith("/p/"))
    fast_starts = [hit.time for hit in other_site.hits if hit.path.startswith("/p/")]
    assert len(slow_starts) == 7 and len(fast_starts) == 30
    assert min(page_gaps(site)) >= 0.95
    # Most go before the slow host's second page, 1 s after its first (holding the
    # places, none did); a count, so that a loaded machine cannot fail it.
    assert sum(start < slow_starts[1] for start in fast_starts) >= 15, (fast_starts, slow_starts)


def test_a_polite_shared_queue_gives_a_slow_host_to_one_process_and_no_process_hoards_it(
    site, other_site, fleet_redis
):
    """Three processes, one shared queue holding a slow host's 30 pages and another
    host's 30: with the package's scrapy-redis queue, a process takes a slow host's
    request only when the host is ready for the whole fleet, so it holds at most one
    of its requests; and each host has an owner, the process that takes its pages
    while it keeps asking in time."""
    # Disallowed pages too: dropped by the robots middleware, they must not hold the
    # host for the fleet (the hold would last DOWNLOAD_TIMEOUT, past wait_all's limit).
    seed = seed_slow_and_fast(site, other_site, CRAWL_DELAY, slow=30, fast=30, disallowed=5)
    settings = fleet_settings(
        fleet_redis,
        DOMAINBUDGET_ENABLED=False,
        SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
        EXTENSIONS={"tests.crawl.SlotOccupancy": 0},
        TEST_WATCHED_SLOT="127.0.0.1",  # the slow host's slot
    )
    stats = wait_all(start_fleet(settings, [seed]))
    pages = [hit for hit in site.hits if hit.path.startswith("/p/")]
    assert len(pages) == 30
    assert not any(hit.path.startswith("/private") for hit in site.hits)
    assert max(s.get("test/slot_active_max", 0) for s in stats) == 1
    assert min(page_gaps(site, robots_too=True)) >= CRAWL_DELAY
    assert len([h for h in other_site.hits if h.path.startswith("/p/")]) == 30
    # Taken from its owner only when it was ready for a while and not taken: rarely.
    agents = Counter(hit.user_agent for hit in pages)
    assert agents.most_common(1)[0][1] >= 25, agents


def test_a_polite_shared_queue_shares_the_hosts_and_their_pages_evenly(fleet_redis):
    """90 hosts with a Crawl-delay, 2 pages each, linked from one seed page: the hosts
    go to the three processes in turn, and a host's pages to its owner, so each
    process fetches close to a third of the pages (whichever process's engine asks
    more often would otherwise take more and more), and on every host's clock no two
    requests are closer than the delay."""
    hosts, pages = 90, 2
    agents, by_host = Counter(), defaultdict(set)

    def on_page(host, path, headers):
        agents[headers["user-agent"]] += 1
        by_host[host].add(headers["user-agent"])

    site = seeded_sites(hosts, 900, pages, CRAWL_DELAY, on_page)
    try:
        settings = fleet_settings(
            fleet_redis,
            DOMAINBUDGET_ENABLED=False,
            SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
            CONCURRENT_REQUESTS=32,  # room for a process's every host at once
            # A process idle while another fetches the seed stays for its hosts
            # (closed, it would leave them to the others after their grace).
            MAX_IDLE_TIME_BEFORE_CLOSE=6,
        )
        stats = wait_all(start_fleet(settings, [site.url(site.hosts[0], "/seed")]))
    finally:
        site.close()
    short = [gap for gap in site.gaps() if gap[0] < CRAWL_DELAY]
    assert short == []
    assert sum(s.get("fleet/robots_fetched", 0) for s in stats) == hosts
    assert sum(agents.values()) == hosts * pages
    # A third each is 60; a process whose engine is late on a loaded machine loses
    # a few of its hosts' pages to the others.
    assert len(agents) == 3 and min(agents.values()) >= 45, agents
    shared = [host for host, processes in by_host.items() if len(processes) > 1]
    assert len(shared) <= hosts // 10, (len(shared), agents)


def test_a_polite_shared_queue_wakes_an_idle_owner_at_once(fleet_redis):
    """Two processes.  A chain of 5 slow pages (3 s each): each links the next and 4
    new hosts' pages, the new hosts given to the two processes in turn.  Between two
    waves, the process not fetching the chain's page has nothing to do: told through
    its wake list at each push, it takes its hosts' pages before their grace ends.
    (Looking only at Scrapy's heartbeat, every 5 s, it would find its pages of about
    half of the waves taken by the other, which asks when its chain page ends.)"""
    waves, links = 5, 4
    fetched = Counter()  # the new hosts' pages, by user agent

    def respond(host, path, headers):
        if path == "/robots.txt":
            return 200, {}, b"User-agent: *\nAllow: /\n"
        urls = []
        if path.startswith("/s/"):
            n = int(path[3:])
            urls = [site.url(site.hosts[1 + n * links + k], "/q") for k in range(links)]
            urls += [site.url(site.hosts[0], f"/s/{n + 1}")] if n + 1 < waves else []
        else:
            fetched[headers["user-agent"]] += 1
        body = "".join(f'<a href="{url}">.</a>' for url in urls)
        return 200, {"Content-Type": "text/html"}, f"<html><body>{body}</body></html>".encode()

    def page_time(host, path):
        return 3.0 if path.startswith("/s/") else 0.0

    site = BroadSite(addresses(1 + waves * links, first=1100), respond, page_time)
    try:
        settings = fleet_settings(
            fleet_redis,
            DOMAINBUDGET_ENABLED=False,
            SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
            # Idle seconds count from the first, and later pages do not reset them:
            # a process with nothing to do between waves stays open through them all.
            MAX_IDLE_TIME_BEFORE_CLOSE=20,
        )
        stats = wait_all(start_fleet(settings, [site.url(site.hosts[0], "/s/0")], processes=2))
    finally:
        site.close()
    assert sum(fetched.values()) == waves * links
    # The wakes download nothing: every request the downloaders sent reached the site.
    assert sum(s["crawldelay/engine_wakes"] for s in stats) > 0
    sent = sum(s["downloader/request_count"] for s in stats)
    assert sent == sum(len(hits) for hits in site.arrivals.values())
    # About 10 each (a wave's 5 new units go in turn); one taken after its grace, at most.
    assert len(fetched) == 2 and min(fetched.values()) >= 8, fetched


def test_a_polite_shared_queue_does_not_poll_while_nothing_is_queued(fleet_redis):
    """Two processes, 30 hosts without a floor, one page each, linked from one seed
    page: each process fetches its own hosts' pages; once nothing is queued, neither
    wakes its engine but to see the last units' grace end, a few times (polling once a
    second, each would wake it about 10 times in its 12 idle seconds)."""
    hosts, pages = 30, Counter()

    def respond(host, path, headers):
        if path == "/robots.txt":
            return 200, {}, b"User-agent: *\nAllow: /\n"
        body = ""
        if path == "/seed":
            body = "".join(f'<a href="{site.url(other, "/p")}">.</a>' for other in site.hosts)
        else:
            pages[headers["user-agent"]] += 1
        return 200, {"Content-Type": "text/html"}, f"<html><body>{body}</body></html>".encode()

    site = BroadSite(addresses(hosts, first=1000), respond)
    try:
        settings = fleet_settings(
            fleet_redis,
            DOMAINBUDGET_ENABLED=False,
            SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
            CONCURRENT_REQUESTS=32,
            MAX_IDLE_TIME_BEFORE_CLOSE=12,
        )
        fleet = start_fleet(settings, [site.url(site.hosts[0], "/seed")], processes=2)
        stats = wait_all(fleet)
    finally:
        site.close()
    assert sum(pages.values()) == hosts
    assert len(pages) == 2 and min(pages.values()) >= 12, pages  # 15 each
    idle = [s.get("crawldelay/engine_wakes", 0) - s["test/wakes_by_last_page"] for s in stats]
    assert max(idle) <= 5, idle


def quiet_after_429(site):
    """The seconds from the site's 429 answer to its next request, from any process."""
    hits = sorted(site.hits, key=lambda hit: hit.time)
    index = next(i for i, hit in enumerate(hits) if hit.status == 429)
    return hits[index + 1].time - hits[index].time, hits[index + 1 :]


@pytest.mark.parametrize(
    ("robots", "queue"),
    [
        # A floored host: every process asks the fleet's Redis before each request.
        (f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n", {}),
        # No floor, the polite shared queue: the host is not handed out while held.
        (
            "User-agent: *\nAllow: /\n",
            {"SCHEDULER_QUEUE_CLASS": "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"},
        ),
    ],
    ids=["crawl-delay", "host-ready-queue"],
)
def test_a_429_answered_to_one_process_holds_every_process(site, fleet_redis, robots, queue):
    site.route("/robots.txt", body=robots.encode())
    site.answer_first("/p/", Route(status=429, headers={"Retry-After": "3"}))
    urls = [f"{site.url}/p/{i}" for i in range(16)]
    # Two requests in hand a process, so one process cannot take every page while the
    # other, idle, waits for its engine's 5 s heartbeat to pull start URLs; 16 pages
    # outlast two heartbeats even with the 3 s hold.
    settings = fleet_settings(
        fleet_redis,
        DOMAINBUDGET_ENABLED=False,
        RETRY_ENABLED=True,
        BACKOFF_DELAY=0.1,
        CONCURRENT_REQUESTS=2,
        **queue,
    )
    stats = wait_all(start_fleet(settings, urls, processes=2))
    assert 429 in {hit.status for hit in site.hits}, (site.paths(), stats)
    quiet, later = quiet_after_429(site)
    assert quiet >= 3.0, [(round(h.time, 3), h.path, h.user_agent, h.status) for h in site.hits]
    assert sum(hit.path.startswith("/p/") for hit in later) == len(urls)  # 429'd one retried
    if not queue:  # scrapy-redis's own queue: each process holds pages of the site
        agents = {hit.user_agent for hit in site.hits if hit.path.startswith("/p/")}
        assert agents == {"TestBot/1.0 (0)", "TestBot/1.0 (1)"}
    held, other = sorted(stats, key=lambda each: -each.get("backoff/holds", 0))
    assert held["backoff/holds"] == 1 and "backoff/holds" not in other
    assert other["backoff/fleet_holds_learnt"] >= 1  # read from the fleet's Redis


def test_a_process_killed_mid_crawl_loses_at_most_its_one_request_of_the_slow_host(
    site, other_site, fleet_redis
):
    """What SIGKILL costs a fleet on the package's shared queue: the killed process
    held at most one request of a floored host (its in-flight one), so every other
    page of that host stays in Redis and the other processes fetch it.  Its hold on
    the host lapses after DOWNLOAD_TIMEOUT and a margin."""
    site.answer_first("/p/", *[Route(delay=0.3)] * 16)  # each page in flight for 0.3 s
    seed = seed_slow_and_fast(site, other_site, 0.3, slow=16, fast=10)
    settings = fleet_settings(
        fleet_redis,
        DOMAINBUDGET_ENABLED=False,
        SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
        DOWNLOAD_TIMEOUT=2,  # the killed process's hold lapses 2 + 5 s after its pop
    )
    fleet = start_fleet(settings, [seed])
    wait_for_pages(site, 4)
    served = {}
    for hit in site.hits:
        served[hit.user_agent] = served.get(hit.user_agent, 0) + 1
    victim = max(range(3), key=lambda n: served.get(f"TestBot/1.0 ({n})", 0))
    fleet[victim].kill()
    fleet[victim].wait()
    wait_all(fleet[:victim] + fleet[victim + 1 :])
    pages = {hit.path for hit in site.hits if hit.path.startswith("/p/")}
    assert len(pages) >= 15, sorted(pages)  # 16 pages, at most 1 lost with the process
    assert min(page_gaps(site, robots_too=True)) >= 0.3


def test_in_the_shared_queue_a_spent_budget_waits_for_no_crawl_delay(site, fleet_redis):
    """robots.txt takes the day's one request: the 6 pages, each a Crawl-delay of 30 s
    from the previous request, are dropped at once (3 minutes of waiting before)."""
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 30\n")
    began = time.monotonic()
    settings = fleet_settings(
        fleet_redis,
        SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
        DOMAINBUDGET_POLICY={"default_policy": {"max_requests_per_day": 1}},
    )
    [stats] = wait_all(start_fleet(settings, [f"{site.url}/p/{i}" for i in range(6)], 1))
    assert time.monotonic() - began < 40  # not one Crawl-delay a page
    assert site.paths() == ["/robots.txt"]
    assert stats["domainbudget/dropped/max_requests_per_day"] == 6


@pytest.mark.parametrize(
    ("queue", "reactor"),
    [
        ("scrapy_rfc9309.redisqueue.HostReadyRedisQueue", True),
        ("scrapy_redis.queue.PriorityQueue", True),
    ]
    + ([("scrapy_rfc9309.redisqueue.HostReadyRedisQueue", False)] if WITHOUT_REACTOR else []),
    ids=lambda value: {
        "scrapy_rfc9309.redisqueue.HostReadyRedisQueue": "host-ready-queue",
        "scrapy_redis.queue.PriorityQueue": "scrapy-redis-queue",
        True: "reactor",
        False: "no-reactor",
    }[value],
)
def test_requests_a_spent_budget_drops_after_their_unit_is_ready_spend_no_floor(
    site, fleet_redis, queue, reactor
):
    """A page-a-day budget, a Crawl-delay of 2 s: the day's page links 20 more, each
    dropped by the budget once its unit is ready.  The site never sees them, so none
    spends the unit's floor: they go one after another, the crawl ending about a
    Crawl-delay after the day's page (each spending one took 40 s more).  (With
    scrapy-redis's queue the requests wait in the gate, which asks the budget before
    a request waits: that case fails only with both undone.)"""
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 2\n")
    links = "".join(f'<a href="{site.url}/p/{i}">.</a>' for i in range(1, 21))
    site.route("/p/0", body=f"<html><body>{links}</body></html>".encode())
    settings = fleet_settings(
        fleet_redis,
        SCHEDULER_QUEUE_CLASS=queue,
        DOMAINBUDGET_POLICY={"default_policy": {"max_pages_per_day": 1}},
        TWISTED_REACTOR_ENABLED=reactor,
    )
    [stats] = wait_all(start_fleet(settings, [f"{site.url}/p/0"], processes=1), timeout=30)
    assert site.paths() == ["/robots.txt", "/p/0"]
    assert stats["domainbudget/dropped/max_pages_per_day"] == 20


@with_and_without_the_reactor
def test_in_the_shared_queue_pages_an_unreachable_robots_txt_refuses_wait_for_no_hold(
    site, other_site, fleet_redis, reactor
):
    """A site whose robots.txt answers 503 is held (here for 10 minutes), and every page
    of it is disallowed (RFC 9309 §2.3.1.4).  Its pages are dropped at once, as with
    the package's one-process queue, both those queued in Redis when the robots.txt
    is decided and those found afterwards: they never reach the site, so they wait
    for no hold (in Redis, either kind waited for the hold's end: the crawl did not
    end within the test's minute)."""
    site.route("/robots.txt", status=503)
    other_site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    other_url = other_site.url.replace("127.0.0.1", "localhost")

    def page(*urls):
        return "<html><body>{}</body></html>".format(
            "".join(f'<a href="{url}">.</a>' for url in urls)
        ).encode()

    # /p/3 to /p/5 are found 2 s after the others, their robots.txt decided by then.
    other_site.route("/next", body=page(*(f"{site.url}/p/{i}" for i in range(3, 6))), delay=2.0)
    other_site.route(
        "/seed", body=page(*(f"{site.url}/p/{i}" for i in range(3)), f"{other_url}/next")
    )
    settings = fleet_settings(
        fleet_redis,
        DOMAINBUDGET_ENABLED=False,
        SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
        BACKOFF_START=600,
        TWISTED_REACTOR_ENABLED=reactor,
    )
    [stats] = wait_all(start_fleet(settings, [f"{other_url}/seed"], processes=1), timeout=60)
    assert site.paths() == ["/robots.txt"]
    assert stats["rfc9309/forbidden"] == 6
    assert stats["backoff/holds"] == 1


def test_a_plain_spider_with_scrapy_redis_and_the_shared_queue_crawls_its_start_urls(
    site, fleet_redis
):
    """Its start requests reach Redis through pipelined pushes: until they do, the
    queue counts them, and the crawl is not idle (it closed at once, nothing sent)."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    settings = fleet_settings(fleet_redis, DOMAINBUDGET_ENABLED=False)
    del settings["FLEET_REDIS_URL"], settings["SCHEDULER_QUEUE_CLASS"]  # the add-on's
    crawl = run_crawl(
        "--dedupe", json.dumps(settings), *(f"{site.url}/p/{i}" for i in range(3)), timeout=60
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert sorted(path for path in site.paths() if path.startswith("/p/")) == [
        "/p/0",
        "/p/1",
        "/p/2",
    ]


@with_and_without_the_reactor
def test_a_shared_queue_whose_redis_is_away_for_a_while_loses_nothing_and_closes_nothing(
    reactor,
):
    """scrapy-redis's scheduler and the add-on's defaults (the host-ready queue, the
    fleet through ``REDIS_URL``), 2 processes, 40 hosts of 6 pages each linked from a
    seed each.  Redis stops once 40 pages are in, from both processes, and comes back
    6 s later from its append-only file.  An unreachable queue is not an empty one:
    no process closes for want of work (``MAX_IDLE_TIME_BEFORE_CLOSE`` is 3 s), every
    page is fetched once, no host sees a gap below its Crawl-delay, each process says
    once that the fleet's Redis is away (the queue, the spacing and robots.txt in one
    line) and once that it is back, and no traceback of this package's is logged."""
    from tests.budget.redis_server import RedisServer

    hosts, pages, delay = 40, 6, 0.3
    fetched, senders = Counter(), set()

    def on_page(host, path, headers):
        fetched[host, path] += 1
        senders.add(headers["user-agent"])

    server = RedisServer(durable=True)
    site = seeded_sites(hosts, 1300, pages, delay, on_page)
    try:
        settings = fleet_settings(
            server.url,
            DOMAINBUDGET_ENABLED=False,
            MAX_IDLE_TIME_BEFORE_CLOSE=3,
            REDIS_START_URLS_BATCH_SIZE=1,
            TWISTED_REACTOR_ENABLED=reactor,
        )
        del settings["SCHEDULER_QUEUE_CLASS"], settings["FLEET_REDIS_URL"]  # the add-on's
        # A seed each (the same links): with one, the process that did not take it
        # could close idle, as configured, before the other's links reached Redis.
        seeds = [site.url(host, "/seed") for host in site.hosts[:2]]
        fleet = start_fleet(settings, seeds, processes=2)
        deadline = time.monotonic() + 60
        while sum(fetched.values()) < 40 or len(senders) < 2:
            assert time.monotonic() < deadline, (fetched, senders)
            time.sleep(0.02)
        server.stop()
        time.sleep(6)
        server.restart()
        logs = []
        stats = wait_all(fleet, logs=logs)
    finally:
        site.close()
        server.stop()
    assert sorted(fetched.values()) == [1] * (hosts * pages), [
        k for k, v in fetched.items() if v != 1
    ]
    short = [gap for gap in site.gaps() if gap[0] < 0.95 * delay]
    assert short == []
    for log in logs:  # one line each way, for the queue, the spacing and robots.txt
        assert log.count("Fleet Redis unreachable") == 1, log[-3000:]
        assert log.count("taking none from the shared queue") == 1, log[-3000:]
        assert log.count("Fleet Redis answers again") == 1, log[-3000:]
        assert "The shared queue" not in log, log[-3000:]
        assert "scrapy_rfc9309" not in "".join(block for block in log.split("Traceback")[1:]), log[
            -3000:
        ]
    assert all(s.get("fleet/queue_unreachable", 0) >= 1 for s in stats), stats
    assert all(s["test/twisted_reactor"] is reactor for s in stats)


def test_requests_scheduled_while_the_shared_queues_redis_is_away_outlive_a_stop(site, tmp_path):
    """A page of the add-on's shared queue is answered 503 with ``Retry-After: 30``
    after Redis went away: Scrapy's retry of it is scheduled while Redis is away, and
    waits for the hold.  The process is stopped (SIGTERM) before Redis is back: it
    saves the retry in the project's ``.scrapy`` directory, and the next process
    there gives it to Redis, which answers again, and fetches it."""
    from tests.budget.redis_server import RedisServer

    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.route("/seed", body=f'<html><body><a href="{site.url}/p/0">.</a></body></html>'.encode())
    # Answered 2 s after it is asked: Redis is stopped by then, even on a loaded machine.
    site.answer_first("/p/0", Route(status=503, headers={"Retry-After": "30"}, delay=2.0))
    saved = tmp_path / ".scrapy" / "rfc9309-shared-queue"
    server = RedisServer(durable=True)
    try:
        settings = fleet_settings(server.url, DOMAINBUDGET_ENABLED=False, LOG_LEVEL="INFO")
        del settings["SCHEDULER_QUEUE_CLASS"], settings["FLEET_REDIS_URL"]  # the add-on's
        (first,) = start_fleet(settings, [f"{site.url}/seed"], processes=1, cwd=tmp_path)
        deadline = time.monotonic() + 60
        while "/p/0" not in site.paths():  # asked: its 503 comes in 2 s
            assert time.monotonic() < deadline and first.poll() is None, site.paths()
            time.sleep(0.02)
        server.stop()
        time.sleep(3)  # the retry is scheduled, and waits for the hold
        first.send_signal(signal.SIGTERM)
        logs = []
        wait_all([first], logs=logs)
        assert "closes with 1 request(s) scheduled while Redis was away" in logs[0], logs[0][-3000:]
        assert site.count("/p/0") == 1
        assert len(list(saved.iterdir())) == 1
        server.restart()
        wait_all(start_fleet(settings, [], processes=1, cwd=tmp_path), logs=logs)
    finally:
        server.stop()
    assert "gives Redis 1 request(s)" in logs[1], logs[1][-3000:]
    assert [hit.status for hit in site.hits if hit.path == "/p/0"] == [503, 200]
    assert list(saved.iterdir()) == []


@pytest.mark.parametrize(
    ("dupefilter", "concurrent_items"),
    [
        ("scrapy_rfc9309.dupefilter.RedisDupeFilter", 1),
        ("scrapy_redis.dupefilter.RFPDupeFilter", 100),  # Scrapy's default
        ("scrapy_redis.dupefilter.RFPDupeFilter", 2),
    ],
)
def test_links_found_while_redis_is_away_are_crawled_with_the_packages_dupefilter(
    site, dupefilter, concurrent_items
):
    """A seed's 5 links (/p/0 twice) come while the fleet's Redis is away (restarted
    5 s later).  The package's dupefilter lets them through, and each page is fetched
    once (the second /p/0 is a duplicate), however few CONCURRENT_ITEMS.
    scrapy-redis's cannot check them, and its scheduler loses them (a traceback
    each); with more of them than twice CONCURRENT_ITEMS, the process never ends, as
    the add-on's start-up WARNING says (Scrapy's tasks for the seed's output all
    ended with those errors)."""
    from tests.budget.redis_server import RedisServer

    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.2\n")
    links = "".join(f'<a href="{site.url}/p/{n}">.</a>' for n in (0, 1, 2, 3, 0))
    # Answered 2 s after it is asked: Redis is stopped by then, even on a loaded machine.
    site.route("/seed", body=f"<html><body>{links}</body></html>".encode(), delay=2.0)
    server = RedisServer(durable=True)
    try:
        settings = fleet_settings(
            server.url,
            DOMAINBUDGET_ENABLED=False,
            DUPEFILTER_CLASS=dupefilter,
            CONCURRENT_ITEMS=concurrent_items,
        )
        del settings["SCHEDULER_QUEUE_CLASS"], settings["FLEET_REDIS_URL"]  # the add-on's
        (crawl,) = start_fleet(settings, [f"{site.url}/seed"], processes=1)
        deadline = time.monotonic() + 60
        while "/seed" not in site.paths():  # asked: its answer comes in 2 s
            assert time.monotonic() < deadline and crawl.poll() is None, site.paths()
            time.sleep(0.02)
        server.stop()
        time.sleep(5)
        server.restart()
        if concurrent_items == 2:
            # Idle 2 s (MAX_IDLE_TIME_BEFORE_CLOSE) after its one page, it would close.
            time.sleep(10)
            stuck = crawl.poll() is None
            crawl.kill()
            assert stuck and "/p/0" not in site.paths(), site.paths()
            return
        logs = []
        (stats,) = wait_all([crawl], logs=logs)
    finally:
        server.stop()
    pages = sorted(path for path in site.paths() if path.startswith("/p/"))
    if dupefilter.startswith("scrapy_redis"):
        assert pages == [] and "request_seen" in logs[0], (pages, logs[0][-3000:])
        assert "stops the process for good" in logs[0], logs[0][:3000]  # said at start-up
        return
    assert pages == ["/p/0", "/p/1", "/p/2", "/p/3"], logs[0][-3000:]
    assert stats["fleet/dupefilter_unchecked"] == 4  # the second /p/0: a duplicate
    assert "request_seen" not in logs[0], logs[0][-3000:]  # no traceback of the dupefilter


@with_and_without_the_reactor
def test_a_redis_that_refuses_writes_for_a_while_is_as_one_away(site, reactor):
    """The fleet's Redis refuses every write for 5 s (out of memory: ``maxmemory`` 1
    byte, ``noeviction``; a read-only replica or a failed save refuse them the same
    way) while a seed's 250 links come.  The add-on's shared queue and the package's
    dupefilter take it as away: the process crawls what it schedules itself, each
    page once, and ends.  (Before, the dupefilter's error ended Scrapy's tasks for
    the seed's output, and the process never ended; the queue's pops raised out of
    Scrapy's engine, a traceback each.)"""
    import redis

    from tests.budget.redis_server import RedisServer

    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    links = "".join(f'<a href="{site.url}/p/{n}">.</a>' for n in range(250))
    # Answered 2 s after it is asked: Redis refuses writes by then.
    site.route("/seed", body=f"<html><body>{links}</body></html>".encode(), delay=2.0)
    server = RedisServer()
    client = redis.Redis.from_url(server.url)
    try:
        settings = fleet_settings(
            server.url,
            DOMAINBUDGET_ENABLED=False,
            DUPEFILTER_CLASS="scrapy_rfc9309.dupefilter.RedisDupeFilter",
            TWISTED_REACTOR_ENABLED=reactor,
        )
        del settings["SCHEDULER_QUEUE_CLASS"], settings["FLEET_REDIS_URL"]  # the add-on's
        (crawl,) = start_fleet(settings, [f"{site.url}/seed"], processes=1)
        deadline = time.monotonic() + 60
        while "/seed" not in site.paths():
            assert time.monotonic() < deadline and crawl.poll() is None, site.paths()
            time.sleep(0.02)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)
        time.sleep(5)
        client.config_set("maxmemory", 0)
        logs = []
        (stats,) = wait_all([crawl], logs=logs)
    finally:
        server.stop()
    assert stats["test/twisted_reactor"] is reactor
    pages = Counter(path for path in site.paths() if path.startswith("/p/"))
    assert sorted(pages.values()) == [1] * 250, logs[0][-3000:]
    assert "Fleet Redis unreachable (OOM command not allowed" in logs[0], logs[0][-3000:]
    # Tracebacks there are scrapy-redis's (its spider reads its start URLs with a write).
    frames = [line for line in logs[0].splitlines() if line.lstrip().startswith('File "')]
    assert not [frame for frame in frames if "scrapy_rfc9309" in frame], logs[0][-3000:]
