"""Storage failures in real crawls: a corrupt SQLite file stops the crawl at start-up
naming the file; a Redis that stops and comes back mid-crawl follows
DOMAINBUDGET_ON_STORAGE_ERROR and never lets the limit of a working store be exceeded."""

import pytest
import pytest_twisted

from scrapy_rfc9309._settings import SettingError
from tests.budget.redis_server import RedisServer
from tests.crawl import ChainSpider, crawl
from tests.helpers import BUDGET, page_paths, policy


@pytest_twisted.ensureDeferred
async def test_a_corrupt_sqlite_file_at_start_up_stops_the_crawl_naming_the_file(site, tmp_path):
    path = tmp_path / "budget.sqlite"
    path.write_bytes(b"this is not a database" * 1000)
    # A start-up error: the crawl stops with one line naming the file and the setting.
    with pytest.raises(
        SettingError,
        match=r"the budget storage failed: .*budget\.sqlite: file is not a database \(move the "
        r"file aside for a new one, or set DOMAINBUDGET_SQLITE_PATH\)",
    ):
        await crawl([f"{site.url}/p/0"], DOMAINBUDGET_SQLITE_PATH=str(path), **BUDGET)
    assert site.paths() == []


@pytest.mark.redis  # starts a redis-server of its own
@pytest_twisted.ensureDeferred
async def test_a_redis_restart_mid_crawl_denies_while_down_and_counts_again_after(site):
    redis = RedisServer()
    urls = [f"{site.url}/p/{i}" for i in range(12)]
    seen_while_down = []
    steps = iter(range(1, 100))

    def between(response):  # called after each page, fetched or dropped
        step = next(steps)
        if step == 3:  # 3 pages fetched and counted: stop Redis
            redis.stop()
        elif step == 6:  # 3 more pages tried while it was down: start it again
            seen_while_down.extend(page_paths(site))
            redis.restart()

    try:
        crawler = await crawl(
            urls,
            spider=ChainSpider,
            spider_kwargs={"between": between},
            DOMAINBUDGET_STORAGE="scrapy_rfc9309.budget.storage.RedisStorage",
            DOMAINBUDGET_REDIS_URL=redis.url,
            DOMAINBUDGET_POLICY=policy(pages=5),
            DOMAINBUDGET_ON_STORAGE_ERROR="deny",
            **BUDGET,
        )
    finally:
        redis.stop()
    pages = page_paths(site)
    # Before the stop: 3 pages.  While down: none more ("deny").  After the restart
    # (an empty Redis: its counts are lost): at most the limit of 5 again.
    assert len(seen_while_down) == 3, site.paths()
    assert 3 < len(pages) <= 3 + 5, site.paths()
    assert crawler.stats.get_value("domainbudget/storage_error") >= 1
