"""The states a politeness unit passes through, and what ends each (the table in
``extensions/crawldelay/_politeness.py`` and docs/throttle.md): every wait ends on
a time or on an event that does not need the waiting request."""

from __future__ import annotations

import contextlib
import logging

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_rfc9309.extensions.crawldelay import CrawlDelayThrottle
from scrapy_rfc9309.extensions.crawldelay._politeness import NoLimits, Politeness, concurrency
from scrapy_rfc9309.ledger import INFINITY

A, B = "http://a.com", "http://b.com"


class Floor(NoLimits):
    """Every unit floored *seconds*, none held."""

    def __init__(self, seconds: float) -> None:
        self.seconds = self.max_floor = seconds

    def floor(self, key: str) -> float:
        return self.seconds


def politeness(floor: float = 0.0) -> Politeness:
    polite = Politeness(lambda host: host)
    polite.limit_by(Floor(floor))
    polite.now = lambda: 100.0
    return polite


def test_a_robots_txt_redirected_on_its_own_host_waits_for_nothing_of_its_own():
    polite = politeness()
    polite.deciding("a.com", A, redirected=True)  # /robots.txt -> 301 /robots-real.txt
    assert polite.ready_at("a.com", robots=A) == 0.0  # its next hop starts
    assert polite.ready_at("a.com") == INFINITY  # the pages wait for the file
    assert polite.state("a.com") == "robots.txt being read"
    polite.decided(A)
    assert polite.ready_at("a.com") == 0.0
    assert polite.state("a.com") == "ready"


def test_another_fetch_waits_for_a_file_being_read_which_needs_no_request():
    polite = politeness()
    polite.deciding("a.com", A, redirected=False)  # the file came: only parsing is left
    assert polite.ready_at("a.com", robots="https://a.com") == INFINITY
    polite.decided(A)
    assert polite.ready_at("a.com", robots="https://a.com") == 0.0


def test_redirects_that_cross_never_wait_in_a_circle():
    """a.com's robots.txt -> b.com's unit, b.com's -> a.com's, both being read: the
    later of the two waits for the earlier, never the other way round."""
    polite = politeness()
    polite.deciding("a.com", A, redirected=True)
    polite.deciding("b.com", B, redirected=True)
    assert polite.ready_at("b.com", robots=A) == 0.0  # A's hop into b.com: A came first
    assert polite.ready_at("a.com", robots=B) == INFINITY  # B's hop into a.com waits for A
    polite.decided(A)
    assert polite.ready_at("a.com", robots=B) == 0.0


def test_pages_wait_for_a_robots_txt_request_waiting_to_start():
    polite = politeness(floor=1.0)
    with polite.robots_first("a.com"):
        assert polite.ready_at("a.com") == INFINITY
        assert polite.ready_at("a.com", robots=A) == 0.0
    assert polite.ready_at("a.com") == 0.0


def test_a_floored_unit_in_progress_then_spaced_then_ready():
    polite = politeness(floor=2.0)
    polite.started("a.com")
    assert polite.ready_at("a.com") == INFINITY
    assert polite.ready_at("a.com", ends_now=True) == 102.0  # what it waits for besides
    assert polite.state("a.com") == "in progress"
    polite.ended("a.com")  # at 100.0
    assert polite.ready_at("a.com") == 102.0
    assert polite.state("a.com") == "spaced"


def test_what_a_unit_waits_for_besides_events_is_its_floor_after_them_or_its_hold():
    """What the robots middleware asks before a fetch (a request waiting more than a
    page may is not sent): the time, not the events, which come without it."""
    polite = politeness(floor=2.0)
    polite.started("a.com")
    polite.deciding("a.com", A, redirected=False)  # the file came at 100.0
    polite.ended("a.com")
    assert polite.ready_at("a.com", robots="https://a.com") == INFINITY
    assert polite.ready_at("a.com", robots="https://a.com", ends_now=True) == 102.0
    polite.limits.held_until = lambda key: 130.0  # type: ignore[method-assign]
    assert polite.ready_at("a.com", robots="https://a.com", ends_now=True) == 130.0


def test_a_unit_without_a_floor_at_its_concurrency_is_in_progress_until_one_ends():
    polite = Politeness(lambda host: host, concurrency=lambda key: 2)
    polite.now = lambda: 100.0
    polite.started("a.com")
    assert polite.ready_at("a.com") == 0.0  # one place left
    polite.started("a.com")
    assert polite.ready_at("a.com") == INFINITY
    assert polite.state("a.com") == "in progress"
    assert polite.ready_at("b.com") == 0.0  # another unit has its own
    polite.ended("a.com")
    assert polite.ready_at("a.com") == 0.0
    assert polite.state("a.com") == "ready"


@pytest.mark.filterwarnings("ignore:The CONCURRENT_REQUESTS_PER_IP setting is deprecated")
def test_a_units_concurrency_is_scrapys_and_autothrottles_target_caps_it():
    slots = {"DOWNLOAD_SLOTS": {"slow.com": {"concurrency": 1}}}
    plain = concurrency(Settings({"CONCURRENT_REQUESTS_PER_DOMAIN": 4, **slots}))
    assert (plain("a.com"), plain("slow.com")) == (4, 1)
    # Scrapy gives every slot CONCURRENT_REQUESTS_PER_IP when it is set.
    per_ip = concurrency(
        Settings({"CONCURRENT_REQUESTS_PER_DOMAIN": 4, "CONCURRENT_REQUESTS_PER_IP": 2})
    )
    assert per_ip("a.com") == 2
    autothrottle = {"AUTOTHROTTLE_ENABLED": True, "CONCURRENT_REQUESTS_PER_DOMAIN": 4}
    assert concurrency(Settings(autothrottle))("a.com") == 1  # its default target, 1.0
    target = {**autothrottle, "AUTOTHROTTLE_TARGET_CONCURRENCY": 2.5}
    assert concurrency(Settings(target))("a.com") == 3


def test_a_robots_txt_decision_pending_past_every_bound_is_logged_once(caplog):
    crawler = get_crawler(
        settings_dict={"CRAWLDELAY_ENABLED": True, "DOWNLOAD_TIMEOUT": 1, "RFC9309_TIMEOUT": 1}
    )
    throttle = CrawlDelayThrottle.from_crawler(crawler)
    polite = throttle.politeness
    clock = [100.0]
    polite.now = lambda: clock[0]
    polite.deciding("a.com", A, redirected=True)
    with caplog.at_level(logging.WARNING):
        throttle._look_for_stalls()
        assert not caplog.records  # not yet: a fetch may take this long
        clock[0] += 1_000
        throttle._look_for_stalls()
        throttle._look_for_stalls()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "http://a.com" in warnings[0]
    assert "robots.txt to be read" in warnings[0]
    assert crawler.stats.get_value("crawldelay/stalled") == 1


def test_a_unit_is_seen_waiting_while_any_of_its_requests_waits_in_the_gate():
    """The live view and the stall watch see a unit while any request of it waits for
    its turn, since the longest waiting one began: a robots.txt request still waiting
    for a hold after the page that began waiting first went back (before, the unit
    left the view with that page)."""
    polite = politeness()
    clock = [100.0]
    polite.now = lambda: clock[0]
    robots = contextlib.ExitStack()
    with polite.waiting("a.com"):  # the page
        clock[0] = 101.0
        robots.enter_context(polite.waiting("a.com"))
        assert polite.waiting_since == {"a.com": 100.0}
    assert polite.waiting_since == {"a.com": 101.0}
    assert polite.units_with_work() == {"a.com"}
    robots.close()
    assert polite.waiting_since == {}
    assert polite.units_with_work() == set()
