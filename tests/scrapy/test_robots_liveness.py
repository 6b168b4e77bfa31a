"""Every crawl ends, whatever a site's robots.txt does: one crawl over many sites, each
with a robots.txt behaviour real sites have (redirects on the same host and to
another port or host, chains of 5 and 6, a loop, errors, a timeout, a reset, a slow or
empty body), run in each mode users run (the package's queue, Scrapy's two, without
the Twisted reactor, the domain unit, a fleet's Redis, a fleet's shared queue).
Asserted from the sites' own log: the crawl ends, every allowed page is fetched, no
disallowed page is, and no two requests to a site with a Crawl-delay are closer than
it (robots.txt included; RFC 9309 §2.3.1.2 for the redirects: up to five hops are
followed, the file found applies to the authority asked about; more, or a loop, and
the file is unavailable: everything allowed)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from dataclasses import dataclass, field

import pytest
import redis

from tests.helpers import WITHOUT_REACTOR
from tests.processes import crawl_process
from tests.robots_sites import (
    Answer,
    RobotsSites,
    file,
    never,
    redirect,
    reset_mid_body,
    respond,
    short_gaps,
    slow_body,
)

RULES = "User-agent: *\nDisallow: /private\n"
PAGES = ["/p/0", "/p/1", "/private/x"]


@dataclass
class Site:
    """A host whose robots.txt does *something*; *outcome*: ``"file"`` (read: its
    rules apply), ``"allow"`` (unavailable: everything allowed) or ``"disallow"``
    (unreachable: nothing allowed); *delay*: the Crawl-delay the file gives."""

    host: str
    routes: dict[str, Answer]
    outcome: str
    delay: float = 0.0
    #: robots.txt hops: a request after one may come sooner than the delay (the
    #: delay is not known before the chain's file is read).
    hops: set[str] = field(default_factory=set)
    #: Other hosts' routes (a redirect's target elsewhere).
    elsewhere: dict[tuple[str, str], Answer] = field(default_factory=dict)
    extra_pages: list[str] = field(default_factory=list)
    #: Other host names of the same site (one unit under CRAWLDELAY_UNIT = "domain").
    also: list[str] = field(default_factory=list)


def chain(hops: int, last: Answer) -> dict[str, Answer]:
    paths = ["/robots.txt", *(f"/r{n}" for n in range(1, hops + 1))]
    routes: dict[str, Answer] = {
        path: redirect(302, target) for path, target in itertools.pairwise(paths)
    }
    routes[paths[-1]] = last
    return routes


def sites() -> list[Site]:
    moved = {"/robots-real.txt": file(RULES)}
    return [
        Site("moved301.com", {"/robots.txt": redirect(301, "/robots-real.txt"), **moved}, "file"),
        Site("found302.com", {"/robots.txt": redirect(302, "/robots-real.txt"), **moved}, "file"),
        Site("temp307.com", {"/robots.txt": redirect(307, "/robots-real.txt"), **moved}, "file"),
        Site(
            "perm308.com",
            {
                "/robots.txt": redirect(308, "/robots-real.txt"),
                "/robots-real.txt": file(RULES + "Crawl-delay: 0.5\n"),
            },
            "file",
            delay=0.5,
            hops={"/robots.txt"},
        ),
        Site("chain5.com", chain(5, file(RULES)), "file"),
        Site("chain6.com", chain(6, file(RULES)), "allow"),
        Site(
            "loop.com",
            {"/robots.txt": redirect(301, "/loop"), "/loop": redirect(301, "/robots.txt")},
            "allow",
        ),
        # http:// -> https:// moves a robots.txt to another port of the same name.
        Site(
            "port.com",
            {"/robots.txt": redirect(301, "http://port.com:8443/robots.txt")},
            "file",
            elsewhere={("port.com:8443", "/robots.txt"): file(RULES)},
        ),
        Site(
            "portchain.com",
            {"/robots.txt": redirect(302, "http://portchain.com:8443/a")},
            "file",
            elsewhere={
                ("portchain.com:8443", "/a"): redirect(307, "/robots-real.txt"),
                ("portchain.com:8443", "/robots-real.txt"): file(RULES),
            },
        ),
        Site(
            "crosshost.com",
            {"/robots.txt": redirect(301, "http://elsewhere.com/shared-robots.txt")},
            "file",
            elsewhere={("elsewhere.com", "/shared-robots.txt"): file(RULES)},
        ),
        Site("gone404.com", {"/robots.txt": respond(404)}, "allow"),
        Site("error500.com", {"/robots.txt": respond(500)}, "disallow"),
        Site("slowdown429.com", {"/robots.txt": respond(429, **{"Retry-After": "3"})}, "disallow"),
        Site("timeout.com", {"/robots.txt": never()}, "disallow"),
        Site("reset.com", {"/robots.txt": reset_mid_body(RULES)}, "disallow"),
        Site("slowbody.com", {"/robots.txt": slow_body(RULES)}, "file"),
        Site("empty.com", {"/robots.txt": respond(200)}, "allow"),
        Site(
            "pageredirect.com",
            {"/robots.txt": file(RULES + "Crawl-delay: 0.5\n"), "/p/0": redirect(301, "/p/moved")},
            "file",
            delay=0.5,
            extra_pages=["/p/moved"],
        ),
        # www. <-> apex: one site, one unit under CRAWLDELAY_UNIT = "domain".
        Site(
            "www.apex.com",
            {"/robots.txt": redirect(301, "http://apex.com/robots.txt")},
            "file",
            delay=0.3,
            hops={"/robots.txt"},
            elsewhere={("apex.com", "/robots.txt"): file(RULES + "Crawl-delay: 0.3\n")},
            also=["apex.com"],
        ),
    ]


@pytest.fixture
def robots_sites():
    served = RobotsSites()
    for site in sites():
        for path, answer in site.routes.items():
            served.route(site.host, path, answer)
        for (host, path), answer in site.elsewhere.items():
            served.route(host, path, answer)
    yield served
    served.close()


def start_urls() -> list[str]:
    return [
        f"http://{host}{path}"
        for site in sites()
        for host in [site.host, *site.also]
        for path in PAGES
    ]


def base_settings(**extra):
    return {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": "TestBot/1.0",
        "RFC9309_TIMEOUT": 2,
        "DOWNLOAD_TIMEOUT": 5,
        "RETRY_ENABLED": False,
        "CONCURRENT_REQUESTS": 8,
        "LOG_LEVEL": "WARNING",
        **extra,
    }


def crawler(sites_, settings, mode="", urls=()):
    env = {**os.environ, "http_proxy": sites_.proxy, "no_proxy": ""}
    return crawl_process(*([mode] if mode else []), json.dumps(settings), *urls, env=env)


def finish(process, timeout=90):
    """The crawl's stats; the test fails if it has not ended within *timeout*."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"the crawl did not end within {timeout} s:\n{stderr[-3000:]}")
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def assert_every_site_right(served, domain_unit=False, fleet=False):
    """*fleet*: several processes, each of which reads a file for itself; one that
    fetched ``apex.com/robots.txt`` as ``www.apex.com``'s redirect has not told the
    others its delay before they fetch it for ``apex.com`` (a known limit)."""
    wrong = []
    for site in sites():
        for host in [site.host, *site.also]:
            pages = sorted(p for p in served.paths(host) if p.startswith(("/p/", "/private")))
            expected = {
                "file": sorted([*PAGES[:2], *site.extra_pages]),
                "allow": sorted([*PAGES, *site.extra_pages]),
                "disallow": [],
            }[site.outcome]
            if pages != expected:
                wrong.append(f"{host}: pages {pages}, expected {expected}")
        if site.delay:
            hosts = {site.host, *site.also}
            groups = [hosts] if domain_unit or not site.also else [{host} for host in hosts]
            for group in groups:
                exempt = {(site.host, hop) for hop in site.hops}
                if fleet:
                    exempt |= {key for key in site.elsewhere if key[1] == "/robots.txt"}
                short = short_gaps(served.arrivals_at(group), site.delay, exempt)
                if short:
                    wrong.append(f"{sorted(group)}: gaps below {site.delay} s: {short}")
    assert not wrong, "\n".join(wrong)


MODES = {
    "package-queue": {},
    "scrapys-queue": {"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"},
    "downloader-aware-queue": {
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue"
    },
    "domain-unit": {"CRAWLDELAY_UNIT": "domain"},
}
if WITHOUT_REACTOR:
    MODES["no-reactor"] = {"TWISTED_REACTOR_ENABLED": False}


@pytest.mark.parametrize("mode", list(MODES))
def test_every_robots_txt_behaviour_ends_right(robots_sites, mode):
    settings = base_settings(**MODES[mode])
    stats = finish(crawler(robots_sites, settings, urls=start_urls()))
    assert stats["finish_reason"] == "finished"
    assert_every_site_right(robots_sites, domain_unit=mode == "domain-unit")


def test_every_robots_txt_behaviour_ends_right_with_the_fleets_redis(robots_sites, fleet_redis):
    settings = base_settings(FLEET_REDIS_URL=fleet_redis)
    stats = finish(crawler(robots_sites, settings, urls=start_urls()))
    assert stats["finish_reason"] == "finished"
    assert_every_site_right(robots_sites)


def test_every_robots_txt_behaviour_ends_right_in_a_fleet_with_its_shared_queue(
    robots_sites, fleet_redis
):
    settings = base_settings(
        FLEET_REDIS_URL=fleet_redis,
        REDIS_URL=fleet_redis,
        SCHEDULER="scrapy_redis.scheduler.Scheduler",
        DUPEFILTER_CLASS="scrapy_redis.dupefilter.RFPDupeFilter",
        SCHEDULER_PERSIST=True,
        SCHEDULER_QUEUE_CLASS="scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
        REDIS_START_URLS_BATCH_SIZE=4,
        MAX_IDLE_TIME_BEFORE_CLOSE=6,
        # Copies expire within a site's crawl: a page the queue's pop took, holding
        # its unit in the fleet's Redis, meets its site's robots.txt fetched again.
        RFC9309_CACHE_TTL=1,
    )
    fleet = [crawler(robots_sites, settings, mode="--redis-spider") for _ in range(2)]
    try:
        server = redis.Redis.from_url(fleet_redis)
        deadline = time.monotonic() + 60
        while int(server.get("pages:ready") or 0) < len(fleet):
            assert time.monotonic() < deadline, "the fleet did not start"
            time.sleep(0.05)
        server.rpush("pages:start_urls", *(json.dumps({"url": url}) for url in start_urls()))
        server.set("pages:started", 1)
        for process in fleet:
            finish(process)
    finally:
        for process in fleet:
            if process.poll() is None:
                process.kill()
    assert_every_site_right(robots_sites, fleet=True)
    refetched = [
        site.host for site in sites() if robots_sites.paths(site.host).count("/robots.txt") > 1
    ]
    assert "perm308.com" in refetched, refetched  # its Crawl-delay: pages 0.5 s apart


@pytest.mark.parametrize("mode", list(MODES))
def test_a_robots_txt_redirected_to_another_authoritys_own_is_fetched_once(robots_sites, mode):
    """``www.shop.com`` redirects its robots.txt and its pages to ``shop.com`` (as
    ``http://`` -> ``https://`` does): the file the redirect found is ``shop.com``'s
    own, so the pages that land there are checked against it with no second fetch
    (before: ``shop.com/robots.txt`` requested twice), and keep its Crawl-delay."""
    robots_sites.route("www.shop.com", "/robots.txt", redirect(301, "http://shop.com/robots.txt"))
    robots_sites.route("shop.com", "/robots.txt", file(RULES + "Crawl-delay: 0.3\n"))
    for path in PAGES:
        robots_sites.route("www.shop.com", path, redirect(301, f"http://shop.com{path}"))
    urls = [f"http://www.shop.com{path}" for path in PAGES]
    stats = finish(crawler(robots_sites, base_settings(**MODES[mode]), urls=urls))
    assert stats["finish_reason"] == "finished"
    assert sorted(robots_sites.paths("www.shop.com")) == sorted(["/robots.txt", *PAGES[:2]])
    first, *pages = robots_sites.paths("shop.com")
    assert (first, sorted(pages)) == ("/robots.txt", PAGES[:2])  # once, first
    assert short_gaps(robots_sites.arrivals_at({"shop.com"}), 0.3, set()) == []


@pytest.mark.parametrize("mode", ["scrapys-queue", "downloader-aware-queue"])
def test_an_authoritys_own_fetch_waiting_while_a_redirect_reads_its_file_is_not_sent(
    robots_sites, mode
):
    """``shop.com`` redirects its robots.txt to ``https://``'s own, whose page is in
    the start URLs too: with Scrapy's queues both fetches start, and ``https://``'s
    own waits in the gate while the redirect reads its file, then would wait its
    ``Crawl-delay: 6``.  It is put off, its page goes back to the scheduler and is
    checked against the file the redirect found: the file is requested once (before:
    twice, the second a Crawl-delay later)."""
    robots_sites.route("shop.com", "/robots.txt", redirect(301, f"http://{HTTPS}/robots.txt"))
    robots_sites.route(HTTPS, "/robots.txt", file(RULES + "Crawl-delay: 6\n"))
    urls = ["http://shop.com/p/0", f"http://{HTTPS}/p/1"]
    stats = finish(crawler(robots_sites, base_settings(**MODES[mode]), urls=urls))
    assert stats["finish_reason"] == "finished"
    assert robots_sites.paths("shop.com") == ["/robots.txt", "/p/0"]
    assert sorted(robots_sites.paths(HTTPS)) == ["/p/1", "/robots.txt"]
    arrivals = robots_sites.arrivals_at({"shop.com", HTTPS})
    assert short_gaps(arrivals, 6, {("shop.com", "/robots.txt")}) == []


@pytest.mark.parametrize("kept_in", ["sqlite", "redis"])
def test_the_copy_a_redirect_found_is_kept_for_its_authority_too(
    robots_sites, tmp_path, request, kept_in
):
    """The same redirect, then a later crawl of ``shop.com`` alone (on restart, or by
    another process of the fleet, whose kept copies are in its Redis): it fetches no
    robots.txt, the copy ``www.shop.com``'s fetch found being ``shop.com``'s too."""
    robots_sites.route("www.shop.com", "/robots.txt", redirect(301, "http://shop.com/robots.txt"))
    robots_sites.route("shop.com", "/robots.txt", file(RULES))
    where = (
        {"FLEET_REDIS_URL": request.getfixturevalue("fleet_redis")}
        if kept_in == "redis"
        else {"RFC9309_PERSISTENT_CACHE_PATH": str(tmp_path / "robots.sqlite")}
    )
    for host in ("www.shop.com", "shop.com"):
        urls = [f"http://{host}{path}" for path in PAGES]
        stats = finish(crawler(robots_sites, base_settings(**where), urls=urls))
        assert stats["finish_reason"] == "finished"
    for host in ("www.shop.com", "shop.com"):
        first, *pages = robots_sites.paths(host)
        assert (first, sorted(pages)) == ("/robots.txt", PAGES[:2])  # once each
    assert stats["rfc9309/persistent_hit"] == 1


HTTPS = "shop.com:8443"  # stands for https://shop.com


def redirect_to_https(sites: RobotsSites) -> list[str]:
    """``http://shop.com`` redirects its robots.txt and pages to ``https://``, and a
    page there redirects to an ``http://`` page (as a link to it would lead there);
    the start URLs."""
    sites.route("shop.com", "/robots.txt", redirect(301, f"http://{HTTPS}/robots.txt"))
    sites.route(HTTPS, "/robots.txt", file(RULES))
    sites.route(HTTPS, "/p/0", redirect(301, "http://shop.com/p/1"))
    sites.route("shop.com", "/p/1", redirect(301, f"http://{HTTPS}/p/1"))
    return [f"http://{HTTPS}/p/0", f"http://{HTTPS}/private/x"]


@pytest.mark.parametrize("mode", [*MODES, "fleet-redis"])
def test_a_redirect_to_a_robots_txt_at_hand_ends_there(robots_sites, request, mode):
    """The other way round: ``https://``'s file is at hand when ``http://``'s
    robots.txt redirects to it.  That hop is the one request for it: the file is not
    fetched again."""
    urls = redirect_to_https(robots_sites)
    settings = (
        {"FLEET_REDIS_URL": request.getfixturevalue("fleet_redis")}
        if mode == "fleet-redis"
        else MODES[mode]
    )
    stats = finish(crawler(robots_sites, base_settings(**settings), urls=urls))
    assert stats["finish_reason"] == "finished"
    assert robots_sites.paths(HTTPS) == ["/robots.txt", "/p/0", "/p/1"]
    assert robots_sites.paths("shop.com") == ["/robots.txt", "/p/1"]


@pytest.mark.parametrize("kept_in", ["sqlite", "redis", "redis-not-kept"])
def test_a_file_from_a_copy_at_hand_is_kept_for_the_redirecting_site_from_its_own_record(
    robots_sites, tmp_path, request, kept_in
):
    """The copy at hand has no body of its own: what is kept across restarts (or for
    the fleet) for ``http://shop.com`` is ``https://``'s own kept record, the file
    with its body, so a later crawl obeys it without a request; with no kept
    copies, nothing is shared for it, and a later crawl fetches it.  Either way its
    rules hold (never "nothing allowed", as a file kept without a body would be)."""
    urls = redirect_to_https(robots_sites)
    if kept_in == "sqlite":
        where = {"RFC9309_PERSISTENT_CACHE_PATH": str(tmp_path / "robots.sqlite")}
    else:
        where = {"FLEET_REDIS_URL": request.getfixturevalue("fleet_redis")}
        if kept_in == "redis-not-kept":
            where["RFC9309_PERSISTENT_CACHE"] = False
    finish(crawler(robots_sites, base_settings(**where), urls=urls))
    later = ["http://shop.com/p/2", "http://shop.com/private/y"]
    stats = finish(crawler(robots_sites, base_settings(**where), urls=later))
    assert stats["finish_reason"] == "finished"
    fetched_again = ["/robots.txt"] if kept_in == "redis-not-kept" else []
    assert robots_sites.paths("shop.com") == ["/robots.txt", "/p/1", *fetched_again, "/p/2"]
