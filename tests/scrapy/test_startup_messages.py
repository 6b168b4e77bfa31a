"""What a crawl says at start-up: which policy, store and fleet it uses, what is wrong
with the crawler's name, and configuration refused with one clear error."""

import json
import logging
import sys

import pytest
import pytest_twisted

from scrapy_rfc9309._settings import SettingError
from tests.crawl import ListSpider, crawl
from tests.helpers import BUDGET

THROTTLE = {"CRAWLDELAY_ENABLED": True, "EXTENSIONS": {"scrapy_rfc9309.CrawlDelayThrottle": 500}}


def messages(caplog, level=logging.INFO):
    return [r.getMessage() for r in caplog.records if r.levelno == level]


@pytest_twisted.ensureDeferred
async def test_each_component_says_once_what_it_uses(site, tmp_path, caplog):
    db = tmp_path / "budget.sqlite"
    with caplog.at_level(logging.INFO):
        await crawl(
            [site.url + "/a"],
            DOMAINBUDGET_SQLITE_PATH=str(db),
            DOMAINBUDGET_POLICY={"default_policy": {"max_pages_per_day": 5}},
            RFC9309_PERSISTENT_CACHE_PATH=str(tmp_path / "robots.sqlite"),
            **BUDGET,
            **THROTTLE,
        )
    info = messages(caplog)
    budget = [m for m in info if m.startswith("Domain budgets:")]
    assert budget == [
        f"Domain budgets: policy from DOMAINBUDGET_POLICY; counted in SQLite {db}; days in UTC"
    ]
    robots = [m for m in info if m.startswith("robots.txt obeyed")]
    assert robots == [
        "robots.txt obeyed (RFC 9309) for product token 'testbot'; copies shared in this "
        f"process only, kept across restarts in {tmp_path / 'robots.sqlite'}"
    ]
    throttle = [m for m in info if m.startswith("Crawl-delay throttle:")]
    assert len(throttle) == 1 and "spacing kept in this process" in throttle[0]


@pytest_twisted.ensureDeferred
async def test_a_policy_given_as_json_on_the_command_line_is_read(site, tmp_path):
    # -s DOMAINBUDGET_POLICY='{...}' reaches the settings as a string, as Scrapy's
    # own dict settings accept it.
    policy = json.dumps({"default_policy": {"max_pages_per_day": 2}})
    crawler = await crawl(
        [f"{site.url}/{n}" for n in range(5)],
        DOMAINBUDGET_SQLITE_PATH=str(tmp_path / "b.sqlite"),
        DOMAINBUDGET_POLICY=policy,
        **BUDGET,
    )
    assert len([p for p in site.paths() if p != "/robots.txt"]) == 2
    assert crawler.stats.get_value("domainbudget/dropped") == 3


@pytest_twisted.ensureDeferred
async def test_a_policy_string_that_is_not_json_is_refused(site, tmp_path):
    with pytest.raises(Exception, match="DOMAINBUDGET_POLICY: not a JSON object"):
        await crawl(
            [site.url + "/a"],
            DOMAINBUDGET_SQLITE_PATH=str(tmp_path / "b.sqlite"),
            DOMAINBUDGET_POLICY="{default_policy: 3",
            **BUDGET,
        )
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_a_policy_file_named_in_the_inline_setting_is_pointed_to_the_file_setting(
    site, tmp_path
):
    with pytest.raises(
        Exception,
        match=r"not a JSON object: .*; to name a policy file, set DOMAINBUDGET_POLICY_FILE = "
        r"'budget\.yaml'",
    ):
        await crawl(
            [site.url + "/a"],
            DOMAINBUDGET_SQLITE_PATH=str(tmp_path / "b.sqlite"),
            DOMAINBUDGET_POLICY="budget.yaml",
            **BUDGET,
        )
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_redis_storage_without_redis_py_is_a_setting_error(site, monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis raises ImportError
    with pytest.raises(SettingError, match=r"pip install 'scrapy-rfc9309\[redis\]'"):
        await crawl(
            [site.url + "/a"],
            DOMAINBUDGET_STORAGE="scrapy_rfc9309.budget.storage.RedisStorage",
            **BUDGET,
        )
    assert site.paths() == []


@pytest.mark.parametrize("value", [0, -1])
@pytest_twisted.ensureDeferred
async def test_a_crawl_delay_cap_of_zero_or_less_is_refused(site, value):
    # 0 means "unlimited" in the budget policy; a cap of 0 would switch Crawl-delay off.
    with pytest.raises(SettingError, match="CRAWLDELAY_MAX_DELAY"):
        await crawl([site.url + "/a"], CRAWLDELAY_MAX_DELAY=value, **THROTTLE)
    assert site.paths() == []


@pytest.mark.parametrize(
    ("settings", "warning"),
    [
        (
            {"USER_AGENT": "Mozilla/5.0 (compatible; MyBot/1.0)"},
            "USER_AGENT starts with 'Mozilla/'",
        ),
        ({"ROBOTSTXT_USER_AGENT": "AI2Bot"}, "product token 'ai2bot' (from ROBOTSTXT_USER_AGENT)"),
        ({"USER_AGENT": "Bot 2.0"}, None),
    ],
    ids=["mozilla", "digits", "valid"],
)
@pytest_twisted.ensureDeferred
async def test_a_product_token_robots_txt_cannot_name_is_warned_about(
    site, caplog, settings, warning
):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    with caplog.at_level(logging.INFO):
        await crawl([site.url + "/a"], **settings)
    warnings = [
        m for m in messages(caplog, logging.WARNING) if "product token" in m or "Mozilla" in m
    ]
    if warning is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warning in warnings[0], warnings
        assert "ROBOTSTXT_USER_AGENT" in warnings[0]


class OptedOut(ListSpider):
    custom_settings = {"ROBOTSTXT_OBEY": False}


@pytest_twisted.ensureDeferred
async def test_a_spider_that_opts_out_of_robots_txt_gets_an_info_line_saying_where(site, caplog):
    with caplog.at_level(logging.INFO):
        await crawl([site.url + "/a"], spider=OptedOut, ADDONS={"scrapy_rfc9309.Addon": 500})
    assert site.paths() == ["/a"]
    assert not [m for m in messages(caplog, logging.WARNING) if "ROBOTSTXT_OBEY" in m]
    assert (
        "scrapy_rfc9309: ROBOTSTXT_OBEY is False (set in the spider's custom_settings): "
        "robots.txt is not obeyed" in messages(caplog)
    )
