"""RFC 9309 §2.3.1 access results and §2.4 caching: the fetch-outcome table."""

import pytest

from scrapy_rfc9309 import RobotsTxt
from scrapy_rfc9309.robots import AccessPolicy, FetchOutcome, FetchPlan, outcome_for_status

BOT = "MyBot"
FILE = RobotsTxt.parse("User-agent: *\nDisallow: /private\n")


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, FetchOutcome.SUCCESS),
        (204, FetchOutcome.SUCCESS),
        (301, FetchOutcome.REDIRECT),
        (308, FetchOutcome.REDIRECT),
        (400, FetchOutcome.UNAVAILABLE),
        (401, FetchOutcome.UNAVAILABLE),
        (403, FetchOutcome.UNAVAILABLE),
        (404, FetchOutcome.UNAVAILABLE),
        (410, FetchOutcome.UNAVAILABLE),
        (429, FetchOutcome.UNREACHABLE),
        (500, FetchOutcome.UNREACHABLE),
        (503, FetchOutcome.UNREACHABLE),
        (599, FetchOutcome.UNREACHABLE),
        (100, FetchOutcome.UNREACHABLE),  # undefined for robots.txt: unreachable
        (600, FetchOutcome.UNREACHABLE),
    ],
)
def test_rfc_2_3_1_status_classes(status, outcome):
    assert outcome_for_status(status) is outcome


def test_rfc_2_3_1_success_obeys_the_file_for_the_cache_ttl():
    entry = AccessPolicy(cache_ttl=100).for_status(200, now=10, robots=FILE)
    assert not entry.check("/private", BOT).allowed
    assert entry.check("/public", BOT).allowed
    assert not entry.expired(109.9) and entry.expired(110)


def test_rfc_2_3_1_unavailable_allows_everything():
    entry = AccessPolicy().for_status(404, now=0)
    assert entry.check("/private", BOT).allowed
    assert "unavailable" in entry.describe()


def test_rfc_2_3_1_unreachable_disallows_everything_by_default():
    entry = AccessPolicy(failure_ttl=60).for_status(503, now=0)
    verdict = entry.check("/anything", BOT)
    assert not verdict.allowed and verdict.rule == "robots.txt unreachable"
    assert entry.expired(60) and not entry.expired(59)
    assert "everything disallowed" in entry.describe()


def test_unreachable_allow_is_the_fail_open_choice():
    entry = AccessPolicy(unreachable_allows=True).unreachable(now=0)
    assert entry.check("/anything", BOT).allowed


def test_rfc_2_4_unreachable_reuses_the_last_good_copy():
    policy = AccessPolicy(cache_ttl=100, failure_ttl=10)
    good = policy.for_status(200, now=0, robots=FILE)
    failed = policy.for_status(500, now=100, previous=good)
    assert failed.stale
    assert not failed.check("/private", BOT).allowed
    assert failed.check("/public", BOT).allowed
    assert failed.expires_at == 110, "a failure is retried after the failure TTL"
    again = policy.unreachable(now=110, previous=failed)
    assert again.stale and not again.check("/private", BOT).allowed
    assert "last good copy" in again.describe()


def test_rfc_2_4_cache_ttl_is_capped_at_24_hours():
    with pytest.raises(ValueError, match="cache_ttl"):
        AccessPolicy(cache_ttl=86401)
    with pytest.raises(ValueError, match="failure_ttl"):
        AccessPolicy(failure_ttl=-1)


def test_redirect_is_not_a_final_result():
    with pytest.raises(ValueError):
        AccessPolicy().for_status(301, now=0)


def test_entry_exposes_the_delay_of_the_obeyed_file():
    policy = AccessPolicy()
    robots = RobotsTxt.parse("User-agent: *\nCrawl-delay: 3\n")
    assert policy.success(robots, now=0).delay(BOT) == 3
    assert policy.unavailable(now=0).delay(BOT) is None


def test_rfc_2_3_1_2_a_fetch_that_goes_on_after_a_pause_keeps_its_hops_and_gets_its_time_again():
    """A fetch whose next hop was put off goes on from that hop: the redirects it
    followed still count (at most *max_redirects*, no loop back), and its deadline
    starts again when it goes on."""
    plan = FetchPlan("http://a.test", AccessPolicy(), max_redirects=2, timeout=10, now=0)
    assert plan.redirect("/r1", now=1) is None
    assert plan.time_left(30) < 0
    plan.go_on(30)
    assert (plan.url, plan.hops, plan.time_left(30)) == ("http://a.test/r1", 1, 10)
    assert plan.redirect("/robots.txt", now=31).reason == "redirect loop"
    plan = FetchPlan("http://a.test", AccessPolicy(), max_redirects=1, timeout=10, now=0)
    plan.redirect("/r1", now=1)
    plan.go_on(30)
    assert plan.redirect("/r2", now=31).reason == "too many redirects"
