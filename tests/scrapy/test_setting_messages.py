"""Settings that did nothing, or something else, without a word: each is refused
with a message naming the setting, or warned about at start-up."""

import logging

import pytest
from scrapy.settings import Settings

from scrapy_rfc9309._settings import (
    BACKOFF_DEFAULTS,
    ROBOTS_DEFAULTS,
    BackoffSettings,
    CrawlDelaySettings,
    RobotsSettings,
    SettingError,
    mistakes,
    use_mistakes,
    with_defaults,
)
from scrapy_rfc9309.budget.policy import BudgetPolicy, PolicyError
from scrapy_rfc9309.downloadermiddlewares.budget._setup import load_policy


def robots_settings(**values):
    return RobotsSettings.from_settings(with_defaults(Settings(values), ROBOTS_DEFAULTS))


def cmdline(**values):
    """Settings as ``-s NAME=VALUE`` gives them: every value a string."""
    settings = Settings()
    for name, value in values.items():
        settings.set(name, value, priority="cmdline")
    return settings


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"RFC9309_CACHE_TTL": 0},
            "RFC9309_CACHE_TTL must be more than 0 and at most 86400, not 0",
        ),
        (
            {"RFC9309_MAX_BYTES": 5},
            "RFC9309_MAX_BYTES must be at least 512000 and at most 67108864, not 5",
        ),
        ({"RFC9309_TIMEOUT": -1}, "RFC9309_TIMEOUT must be at least 0.001 and at most 3600"),
    ],
    ids=["ttl-zero", "max-bytes", "timeout"],
)
def test_numbers_out_of_range_name_their_bounds_as_written(values, message):
    with pytest.raises(SettingError) as error:
        robots_settings(**values)
    assert str(error.value).startswith(message)


def test_a_crawl_delay_cap_below_zero_says_more_than_zero():
    settings = Settings({"CRAWLDELAY_ENABLED": True, "CRAWLDELAY_MAX_DELAY": -5})
    with pytest.raises(SettingError, match="must be more than 0 and at most 86400, not -5"):
        CrawlDelaySettings.from_settings(settings)


def test_a_spiders_download_delay_is_judged_only_with_the_throttle_on():
    """Before Scrapy 2.19 the throttle reads the spider's ``download_delay`` itself
    (later Scrapy turns it into ``DOWNLOAD_DELAY``): with ``CRAWLDELAY_ENABLED`` off,
    the attribute is Scrapy's business, and the throttle neither reads nor refuses it."""
    asked = []

    def spider_delay():
        asked.append(True)
        raise SettingError("The spider's download_delay must be seconds, not 'soon'")

    assert CrawlDelaySettings.from_settings(Settings(), spider_delay) is None
    assert not asked
    with pytest.raises(SettingError, match="download_delay must be seconds"):
        CrawlDelaySettings.from_settings(Settings({"CRAWLDELAY_ENABLED": True}), spider_delay)


def test_backoff_max_below_backoff_start_is_refused():
    settings = with_defaults(Settings({"BACKOFF_START": 10, "BACKOFF_MAX": 5}), BACKOFF_DEFAULTS)
    with pytest.raises(SettingError, match=r"BACKOFF_MAX \(5 s\) must be at least BACKOFF_START"):
        BackoffSettings.from_settings(settings)


def test_list_settings_take_json_lists_on_the_command_line():
    settings = with_defaults(cmdline(BACKOFF_HTTP_CODES="[429, 503, 502]"), BACKOFF_DEFAULTS)
    backoff = BackoffSettings.from_settings(settings)
    assert backoff is not None and backoff.codes == {429, 502, 503}
    settings = with_defaults(cmdline(BACKOFF_HTTP_CODES="429,503"), BACKOFF_DEFAULTS)
    assert BackoffSettings.from_settings(settings).codes == {429, 503}
    bad = with_defaults(cmdline(BACKOFF_HTTP_CODES='["429", "abc"]'), BACKOFF_DEFAULTS)
    with pytest.raises(SettingError, match=r"e.g. \[429, 503\], or -s BACKOFF_HTTP_CODES=429,503"):
        BackoffSettings.from_settings(bad)
    config = RobotsSettings.from_settings(
        with_defaults(
            cmdline(RFC9309_CONTENT_USES='["train-ai", "search"]', RFC9309_EXCLUDE_PATHS='["/a"]'),
            ROBOTS_DEFAULTS,
        )
    )
    assert config.content_uses == ("train-ai", "search")
    assert config.excluded("http://h/a/b") == "/a"
    with pytest.raises(SettingError, match=r"RFC9309_EXCLUDE_PATHS: .* is not a JSON list"):
        robots_settings(RFC9309_EXCLUDE_PATHS='["/a"')


def test_a_use_of_no_known_name_is_warned_with_the_known_ones():
    [warning] = use_mistakes(("train-aii", "ai-train", "search"))
    assert "'train-aii' is not a known use" in warning
    assert "ai-input, ai-train, ai-use, search, train-ai" in warning


def test_backoff_without_the_throttle_and_a_lone_scrapy_redis_scheduler_are_warned():
    settings = Settings({"ROBOTSTXT_OBEY": True})
    settings.set("BACKOFF_ENABLED", True, priority="project")
    settings.set("CRAWLDELAY_ENABLED", False, priority="project")
    settings.set("SCHEDULER", "scrapy_redis.scheduler.Scheduler", priority="project")
    found = mistakes(settings)
    assert any("BACKOFF_ENABLED is True but CRAWLDELAY_ENABLED is not" in m for m in found)
    assert any("FLEET_REDIS_URL is not set: each process is polite alone" in m for m in found)
    settings.set("FLEET_REDIS_URL", "redis://localhost:6379/0", priority="project")
    settings.set("CRAWLDELAY_ENABLED", True, priority="project")
    assert mistakes(settings) == []
    # The add-on's own BACKOFF_ENABLED is no choice of the user's.
    quiet = Settings({"ROBOTSTXT_OBEY": True})
    quiet.set("BACKOFF_ENABLED", True, priority="addon")
    quiet.set("CRAWLDELAY_ENABLED", False, priority="project")
    assert mistakes(quiet) == []


def test_two_allowlist_entries_for_one_domain_name_both_lines(tmp_path):
    path = tmp_path / "domains.yaml"
    path.write_text(
        "allowlist:\n"
        "  - domain: example.com\n"
        "    max_requests_per_day: 5\n"
        "  - domain: other.org\n"
        "  - domain: '*.Example.com'\n"
    )
    with pytest.raises(PolicyError) as error:
        BudgetPolicy.from_file(path)
    assert str(error.value) == (
        f"{path}, line 5: allowlist.2.domain: 'example.com' is already the domain of "
        "allowlist.0.domain (line 2): merge the two entries"
    )


@pytest.mark.parametrize("text", ["", "# nothing but a comment\n"])
def test_an_empty_policy_file_is_refused(tmp_path, text):
    path = tmp_path / "domains.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError, match="the file holds no policy"):
        BudgetPolicy.from_file(path)


def test_a_policy_and_a_policy_file_say_how_to_clear_the_file(tmp_path):
    settings = Settings(
        {"DOMAINBUDGET_POLICY_FILE": str(tmp_path / "x.yaml"), "DOMAINBUDGET_POLICY": "{}"}
    )
    with pytest.raises(PolicyError, match="-s DOMAINBUDGET_POLICY_FILE= clears"):
        load_policy(settings)


def test_robots_middleware_warns_about_an_unknown_use_at_start_up(caplog):
    from scrapy.utils.test import get_crawler

    from scrapy_rfc9309 import RobotsTxtMiddleware

    crawler = get_crawler(
        settings_dict={
            "ROBOTSTXT_OBEY": True,
            "RFC9309_CONTENT_USES": ["train-aii"],
            "RFC9309_PERSISTENT_CACHE": False,
            "ADDONS": {"scrapy_rfc9309.Addon": 500},
        }
    )
    with caplog.at_level(logging.WARNING):
        RobotsTxtMiddleware.from_crawler(crawler)
    assert any("'train-aii' is not a known use" in r.getMessage() for r in caplog.records)


def test_without_scrapy_cfg_the_robots_middleware_runs_and_keeps_copies_here(tmp_path, monkeypatch):
    """A settings module on PYTHONPATH and no scrapy.cfg: Scrapy's data_path() raises
    NotConfigured there, which silently disabled the robots middleware."""
    from scrapy.utils.test import get_crawler

    from scrapy_rfc9309 import RobotsTxtMiddleware

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "tests.helpers")  # importable, no scrapy.cfg
    crawler = get_crawler(
        settings_dict={"ROBOTSTXT_OBEY": True, "ADDONS": {"scrapy_rfc9309.Addon": 500}}
    )
    middleware = RobotsTxtMiddleware.from_crawler(crawler)
    assert middleware.config.persistent_path == str(tmp_path / ".scrapy" / "rfc9309-robots.sqlite")
    assert middleware.persistent is not None  # its file is made at the first read


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("http://example.test/", "CRAWLDELAY_SITES entry 'http://example.test/' must be a host"),
        (5, "CRAWLDELAY_SITES must be a list of domains, not 5"),
    ],
)
def test_crawldelay_sites_entries_are_checked(value, message):
    from scrapy_rfc9309.extensions.crawldelay._units import unit_of_host

    with pytest.raises(SettingError, match=message.replace("(", r"\(")):
        unit_of_host(Settings({"CRAWLDELAY_UNIT": "domain", "CRAWLDELAY_SITES": value}))
