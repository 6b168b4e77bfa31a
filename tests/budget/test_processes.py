"""Budgets across crawler processes: a killed crawl, and processes sharing Redis."""

import json
import signal
import time

import pytest

from tests.processes import crawl_process


def start_crawl(settings, urls):
    return crawl_process(json.dumps(settings), *urls)


def budget_settings(**extra):
    return {
        "ROBOTSTXT_OBEY": False,
        "DOMAINBUDGET_ENABLED": True,
        "DOWNLOADER_MIDDLEWARES": {"scrapy_rfc9309.DomainBudgetMiddleware": 950},
        **extra,
    }


def page_hits(site):
    return [p for p in site.paths() if p.startswith("/p/")]


def test_a_crawl_killed_with_sigkill_continues_from_the_stored_counts(site, tmp_path):
    for i in range(30):
        site.route(f"/p/{i}", body=b"<html>page</html>", delay=0.2)
    settings = budget_settings(
        DOMAINBUDGET_SQLITE_PATH=str(tmp_path / "budget.sqlite"),
        DOMAINBUDGET_POLICY={"default_policy": {"max_pages_per_day": 10}},
        CONCURRENT_REQUESTS=1,
    )
    urls = [f"{site.url}/p/{i}" for i in range(30)]
    crawler = start_crawl(settings, urls)
    deadline = time.monotonic() + 60
    while len(page_hits(site)) < 4:
        assert time.monotonic() < deadline, "the first crawl did not get going"
        assert crawler.poll() is None, "the first crawl ended early"
        time.sleep(0.05)
    crawler.send_signal(signal.SIGKILL)
    crawler.wait(10)
    first = len(page_hits(site))
    assert 4 <= first < 10

    second = start_crawl(settings, urls)
    assert second.wait(120) == 0
    total = len(page_hits(site))
    # Reserved before sending: a reservation of a request that was in flight when the
    # crawl was killed stays used, so the two runs together fetch 9 or 10 pages.
    assert 9 <= total <= 10


def test_three_crawler_processes_sharing_one_redis_budget_fetch_at_most_30(site, redis_server):
    urls = [f"{site.url}/p/{i}" for i in range(40)]
    settings = budget_settings(
        DOMAINBUDGET_STORAGE="scrapy_rfc9309.budget.storage.RedisStorage",
        DOMAINBUDGET_REDIS_URL=redis_server.url,
        DOMAINBUDGET_POLICY={"default_policy": {"max_pages_per_day": 30}},
    )
    crawls = [start_crawl(settings, urls) for _ in range(3)]
    assert [crawl.wait(120) for crawl in crawls] == [0, 0, 0]
    assert len(page_hits(site)) == 30


@pytest.fixture(autouse=True)
def _fresh_redis_budget(request):
    # The shared Redis server keeps counters between tests: start from a clean day.
    if "redis_server" in request.fixturenames:
        import redis

        redis.Redis.from_url(request.getfixturevalue("redis_server").url).flushdb()
