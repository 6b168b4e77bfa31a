"""The budget middleware in real crawls: what the server received."""

import time

import pytest
import pytest_twisted

from scrapy_rfc9309.budget.policy import PolicyError
from scrapy_rfc9309.budget.storage import MemoryStorage, StorageError
from tests.crawl import crawl
from tests.helpers import BUDGET, page_paths, policy


@pytest.fixture(autouse=True)
def fixed_day(monkeypatch):
    """Every crawl here runs on one fixed day (a crawl across midnight UTC would
    otherwise count on two days and usage() read only the second)."""
    monkeypatch.setattr(
        "scrapy_rfc9309.downloadermiddlewares.budget.unix_time", lambda: 1_763_800_000.0
    )


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "budget.sqlite")


@pytest_twisted.ensureDeferred
async def test_page_budget_of_10_on_50_pages_then_nothing_the_same_day(site, db):
    urls = [f"{site.url}/p/{i}" for i in range(50)]
    crawler = await crawl(
        urls, DOMAINBUDGET_POLICY=policy(pages=10), DOMAINBUDGET_SQLITE_PATH=db, **BUDGET
    )
    assert len(page_paths(site)) == 10  # 16 in flight, still never more than 10
    assert crawler.stats.get_value("domainbudget/dropped/max_pages_per_day") == 40
    assert crawler.stats.get_value("finish_reason") == "finished"
    site.hits.clear()
    await crawl(urls, DOMAINBUDGET_POLICY=policy(pages=10), DOMAINBUDGET_SQLITE_PATH=db, **BUDGET)
    assert page_paths(site) == []  # the same day, across a restart


@pytest_twisted.ensureDeferred
async def test_a_crawl_deletes_the_sqlite_days_older_than_it_keeps(site, db):
    """The SQLite file keeps KEEP_DAYS days, as Redis keys do: a daily crawl's file
    would otherwise grow by every domain of every day."""
    from scrapy_rfc9309.budget.storage import KEEP_DAYS, SQLiteStorage

    today = "2025-11-22"  # the fixed day's, in UTC
    days = ["2025-11-01", "2025-11-19", "2025-11-20", today]
    store = SQLiteStorage(db)
    for day in days:
        store.reserve("example.com", day, 0, 0)
    store.close()
    await crawl(
        [f"{site.url}/p/0"],
        DOMAINBUDGET_POLICY=policy(pages=10),
        DOMAINBUDGET_SQLITE_PATH=db,
        **BUDGET,
    )
    store = SQLiteStorage(db)
    kept = [day for day in days if store.usage(day)]
    store.close()
    assert KEEP_DAYS == 3 and kept == ["2025-11-20", today]


class ForgetFails(MemoryStorage):
    """A storage whose deletion of old days fails (with ``failure``); it counts its
    closes."""

    failure: Exception = StorageError("disk full")
    closed = 0

    @classmethod
    def from_settings(cls, settings):
        return cls()

    def forget_before(self, day):
        raise self.failure

    def close(self):
        ForgetFails.closed += 1


@pytest.mark.parametrize(
    "failure", [StorageError("disk full"), RuntimeError("not implemented here")], ids=repr
)
@pytest_twisted.ensureDeferred
async def test_a_failed_deletion_of_old_days_is_one_warning_and_the_storage_still_closes(
    site, caplog, failure
):
    caplog.set_level("INFO", logger="scrapy_rfc9309")
    ForgetFails.failure, ForgetFails.closed = failure, 0
    await crawl(
        [f"{site.url}/p/{number}" for number in range(3)],
        DOMAINBUDGET_POLICY=policy(pages=10),
        DOMAINBUDGET_STORAGE=ForgetFails,
        **BUDGET,
    )
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "kept the days before 2025-11-20" in warned[0], warned
    assert str(failure) in warned[0]
    assert sorted(page_paths(site)) == ["/p/0", "/p/1", "/p/2"]  # the crawl went on
    assert ForgetFails.closed == 1


@pytest_twisted.ensureDeferred
async def test_a_sister_domain_has_its_own_budget(site, db):
    # 127.0.0.1 and localhost are counted apart (IPs and localhost per host name).
    local = site.url.replace("127.0.0.1", "localhost")
    urls = [f"{site.url}/p/{i}" for i in range(5)] + [f"{local}/p/{i}" for i in range(5)]
    await crawl(urls, DOMAINBUDGET_POLICY=policy(pages=3), DOMAINBUDGET_SQLITE_PATH=db, **BUDGET)
    assert len(page_paths(site)) == 6


@pytest_twisted.ensureDeferred
async def test_robots_txt_is_counted_but_never_refused(site, db):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    crawler = await crawl(
        [f"{site.url}/p/{i}" for i in range(3)],
        DOMAINBUDGET_POLICY=policy(requests=2),
        DOMAINBUDGET_SQLITE_PATH=db,
        **BUDGET,
    )
    # robots.txt counts as a request but is sent even so; 1 page fits in what is left.
    assert site.count("/robots.txt") == 1
    assert len(page_paths(site)) == 1
    assert crawler.stats.get_value("domainbudget/robots_counted") == 1


@pytest.mark.parametrize(
    "addon",
    # With the add-on, its queue reads robots.txt ahead and asks the budget first.
    [{}, {"ADDONS": {"scrapy_rfc9309.Addon": 500}}],
    ids=["middlewares", "addon"],
)
@pytest_twisted.ensureDeferred
async def test_a_domain_whose_budget_is_spent_costs_its_site_no_robots_txt(
    site, db, tmp_path, addon
):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    urls = [f"{site.url}/p/{i}" for i in range(3)]
    settings = {
        "DOMAINBUDGET_POLICY": policy(pages=2),
        "DOMAINBUDGET_SQLITE_PATH": db,
        **BUDGET,
        **addon,
    }
    await crawl(urls, RFC9309_PERSISTENT_CACHE=False, **settings)
    assert site.count("/robots.txt") == 1 and len(page_paths(site)) == 2
    site.hits.clear()
    # A restart the same day, robots.txt not kept: every page would be dropped.
    again = await crawl(urls, RFC9309_PERSISTENT_CACHE=False, **settings)
    assert site.paths() == []
    assert again.stats.get_value("domainbudget/dropped") == 3
    assert again.stats.get_value("rfc9309/request_count") is None


@pytest_twisted.ensureDeferred
async def test_a_non_2xx_response_gives_its_page_back(site, db):
    for i in range(3):
        site.route(f"/p/missing{i}", status=404)
    urls = [f"{site.url}/p/missing{i}" for i in range(3)] + [f"{site.url}/p/{i}" for i in range(5)]
    crawler = await crawl(
        urls,
        DOMAINBUDGET_POLICY=policy(pages=2),
        DOMAINBUDGET_SQLITE_PATH=db,
        CONCURRENT_REQUESTS=1,
        **BUDGET,
    )
    ok_pages = [p for p in page_paths(site) if "missing" not in p]
    assert len(ok_pages) == 2
    assert crawler.stats.get_value("domainbudget/pages_released") == 3


@pytest_twisted.ensureDeferred
async def test_storage_errors_fail_open_by_default_and_closed_on_request(site, tmp_path):
    from tests.server import refused_port

    redis = {
        "DOMAINBUDGET_STORAGE": "scrapy_rfc9309.budget.storage.RedisStorage",
        "DOMAINBUDGET_REDIS_URL": f"redis://127.0.0.1:{refused_port()}/0",
    }
    crawler = await crawl([f"{site.url}/p/1"], **redis, **BUDGET)
    assert page_paths(site) == ["/p/1"]
    assert crawler.stats.get_value("domainbudget/storage_error") >= 1
    site.hits.clear()
    crawler = await crawl(
        [f"{site.url}/p/2"], DOMAINBUDGET_ON_STORAGE_ERROR="deny", **redis, **BUDGET
    )
    # robots.txt is never refused, storage or no storage: the site is not "unreachable".
    assert site.paths() == ["/robots.txt"]
    assert crawler.stats.get_value("rfc9309/success") == 1
    assert page_paths(site) == []


@pytest_twisted.ensureDeferred
async def test_a_malformed_policy_stops_the_crawl_at_start_up(site, tmp_path):
    path = tmp_path / "domains.yaml"
    path.write_text("default_policy:\n  max_pages_per_day: -5\n")
    with pytest.raises(
        PolicyError, match=r"domains\.yaml, line 2: default_policy\.max_pages_per_day"
    ):
        await crawl([f"{site.url}/p/1"], DOMAINBUDGET_POLICY_FILE=str(path), **BUDGET)
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_counters_start_from_zero_when_the_day_changes_mid_crawl(site, db, monkeypatch):
    from tests.crawl import ChainSpider

    now = [1_763_800_000.0]  # a fixed instant; the clock is the one thing mocked
    monkeypatch.setattr("scrapy_rfc9309.downloadermiddlewares.budget.unix_time", lambda: now[0])
    steps = iter([0, 0, 86400, 0, 0])

    def between(response):
        now[0] += next(steps)

    urls = [f"{site.url}/p/{i}" for i in range(6)]
    await crawl(
        urls,
        spider=ChainSpider,
        DOMAINBUDGET_POLICY=policy(pages=2),
        DOMAINBUDGET_SQLITE_PATH=db,
        spider_kwargs={"between": between},
        **BUDGET,
    )
    # Day 1: /p/0 and /p/1, /p/2 dropped; the day changes; day 2: /p/3 and /p/4, /p/5 dropped.
    assert page_paths(site) == ["/p/0", "/p/1", "/p/3", "/p/4"]


def usage(db, key="127.0.0.1"):
    """Today's (requests, pages) of *key* in the SQLite file."""
    from scrapy_rfc9309.budget.policy import day_of, zone
    from scrapy_rfc9309.budget.storage import SQLiteStorage
    from scrapy_rfc9309.downloadermiddlewares.budget import unix_time as now

    storage = SQLiteStorage(db)
    try:
        return storage.usage(day_of(now(), zone("UTC"))).get(key, (0, 0))
    finally:
        storage.close()


WITH_ADDON = {
    "DOMAINBUDGET_ENABLED": True,
    "DOWNLOADER_MIDDLEWARES": {},
    "ADDONS": {"scrapy_rfc9309.Addon": 500},
}


@pytest_twisted.ensureDeferred
async def test_every_retry_is_a_request_of_the_budget(site, db):
    site.route("/p/flaky", status=503)
    await crawl(
        [f"{site.url}/p/flaky"],
        DOMAINBUDGET_POLICY=policy(requests=3),
        DOMAINBUDGET_SQLITE_PATH=db,
        RETRY_ENABLED=True,
        RETRY_TIMES=5,
        BACKOFF_START=0.1,  # a 503 holds the host: short holds, for a short test
        BACKOFF_DELAY=0.1,
        **WITH_ADDON,
    )
    # robots.txt and two tries fill the 3 requests; the other retries are dropped.
    assert site.paths() == ["/robots.txt", "/p/flaky", "/p/flaky"]
    assert usage(db) == (3, 0)  # no 503 is a page


@pytest_twisted.ensureDeferred
async def test_every_redirect_hop_is_a_request_of_the_budget(site, db):
    site.route("/p/moved", status=301, headers={"Location": "/p/new"})
    crawler = await crawl(
        [f"{site.url}/p/moved"],
        DOMAINBUDGET_POLICY=policy(requests=2),
        DOMAINBUDGET_SQLITE_PATH=db,
        **WITH_ADDON,
    )
    assert site.paths() == ["/robots.txt", "/p/moved"]  # the hop to /p/new was refused
    assert crawler.stats.get_value("domainbudget/dropped/max_requests_per_day") == 1
    assert usage(db) == (2, 0)


@pytest_twisted.ensureDeferred
async def test_http_cache_hits_cost_nothing(site, db, tmp_path):
    urls = [f"{site.url}/p/{i}" for i in range(3)]
    settings = {
        "DOMAINBUDGET_POLICY": policy(),
        "DOMAINBUDGET_SQLITE_PATH": db,
        "HTTPCACHE_ENABLED": True,
        "HTTPCACHE_DIR": str(tmp_path / "httpcache"),
        "RFC9309_PERSISTENT_CACHE_PATH": str(tmp_path / "robots.sqlite"),
        **WITH_ADDON,
    }
    await crawl(urls, **settings)
    first = usage(db)
    site.hits.clear()
    crawler = await crawl(urls, **settings)
    # The pages from Scrapy's HTTP cache, robots.txt from the copy kept across
    # restarts (the HTTP cache never answers for it).
    assert site.paths() == []
    assert crawler.stats.get_value("httpcache/hit") == 3
    assert first == usage(db) == (4, 3)


@pytest_twisted.ensureDeferred
async def test_one_info_line_per_domain_when_over_budget_and_a_summary_at_close(site, db, caplog):
    caplog.set_level("INFO", logger="scrapy_rfc9309")
    await crawl(
        [f"{site.url}/p/{i}" for i in range(8)],
        DOMAINBUDGET_POLICY=policy(pages=3),
        DOMAINBUDGET_SQLITE_PATH=db,
        **BUDGET,
    )
    messages = [r.getMessage() for r in caplog.records if r.name.endswith(".budget")]
    reached = [m for m in messages if "reached" in m]
    assert len(reached) == 1 and "127.0.0.1" in reached[0] and "max_pages_per_day = 3" in reached[0]
    assert messages[-1].startswith("Daily budget of 127.0.0.1 on ")
    assert messages[-1].endswith(": 4/unlimited requests, 3/3 pages")  # robots.txt + 3 pages


@pytest_twisted.ensureDeferred
async def test_the_close_summary_names_the_domains_that_used_most_and_sums_the_others(db, caplog):
    """A broad crawl's close summary stays a few lines: the TOP_DOMAINS domains that
    used most pages, each with its use and limits, then one line for the others."""
    from scrapy_rfc9309.downloadermiddlewares.budget import TOP_DOMAINS
    from tests.broad_site import BroadSite, addresses, robots_and_pages

    caplog.set_level("INFO", logger="scrapy_rfc9309")
    site = BroadSite(addresses(TOP_DOMAINS + 5, first=2400), robots_and_pages("User-agent: *\n"))
    try:
        busy = site.hosts[-1]  # 3 pages: first in the summary
        urls = [site.url(host, "/p/0") for host in site.hosts]
        urls += [site.url(busy, f"/p/{number}") for number in (1, 2)]
        await crawl(
            urls, DOMAINBUDGET_POLICY=policy(pages=5), DOMAINBUDGET_SQLITE_PATH=db, **BUDGET
        )
    finally:
        site.close()
    summary = [r.getMessage() for r in caplog.records if "Daily budget" in r.getMessage()]
    assert len(summary) == TOP_DOMAINS + 1
    assert summary[0] == f"Daily budget of {busy} on 2025-11-22: 4/unlimited requests, 3/5 pages"
    assert summary[-1] == "Daily budgets on 2025-11-22: 5 more domains, 10 requests, 5 pages"


@pytest_twisted.ensureDeferred
async def test_a_storage_unreachable_from_the_start_is_said_once_at_start_up(site, caplog):
    from tests.server import refused_port

    caplog.set_level("INFO", logger="scrapy_rfc9309")
    port = refused_port()
    crawler = await crawl(
        [f"{site.url}/p/{i}" for i in range(4)],
        DOMAINBUDGET_STORAGE="scrapy_rfc9309.budget.storage.RedisStorage",
        DOMAINBUDGET_REDIS_URL=f"redis://127.0.0.1:{port}/0",
        **BUDGET,
    )
    failures = [r for r in caplog.records if "Budget storage" in r.getMessage()]
    assert len(failures) == 2 and all(r.levelname == "ERROR" for r in failures)
    start, close = (r.getMessage() for r in failures)
    assert start.startswith(f"Budget storage Redis redis://127.0.0.1:{port}/0 cannot be reached ")
    assert start.endswith(
        "requests go through uncounted until it answers (DOMAINBUDGET_ON_STORAGE_ERROR = 'allow')"
    )
    assert close.startswith("Budget storage failed at close")
    # The start-up read, robots.txt and 4 pages.
    assert crawler.stats.get_value("domainbudget/storage_error") == 6
    assert len(page_paths(site)) == 4
    # The close summary does not claim 0 of the 4 pages that went through.
    summary = [r.getMessage() for r in caplog.records if "Daily budget of" in r.getMessage()]
    assert summary == [
        "Daily budget of 127.0.0.1 on 2025-11-22: use unknown (the budget storage failed)"
    ]


@pytest.mark.parametrize(
    "queue", ["scrapy_rfc9309.pqueues.HostReadyPriorityQueue", "scrapy.pqueues.ScrapyPriorityQueue"]
)
@pytest_twisted.ensureDeferred
async def test_a_request_the_budget_drops_waits_for_no_crawl_delay(site, db, queue):
    """robots.txt takes the day's one request; the 6 pages, each a Crawl-delay of 30 s
    from the previous request, are dropped at once (they waited 30 s each before)."""
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 30\n")
    began = time.monotonic()
    crawler = await crawl(
        [f"{site.url}/p/{i}" for i in range(6)],
        DOMAINBUDGET_POLICY=policy(requests=1),
        DOMAINBUDGET_SQLITE_PATH=db,
        ADDONS={"scrapy_rfc9309.Addon": 500},
        SCHEDULER_PRIORITY_QUEUE=queue,
        **BUDGET,
    )
    assert time.monotonic() - began < 25  # not one Crawl-delay
    assert site.paths() == ["/robots.txt"]
    assert crawler.stats.get_value("domainbudget/dropped/max_requests_per_day") == 6
