"""The backoff core: Retry-After values, and how long each host is held."""

from __future__ import annotations

import random
from email.utils import formatdate

import pytest

from scrapy_rfc9309.backoff import UnitBackoff, parse_retry_after
from scrapy_rfc9309.backoff._retryafter import FOREVER

NOW = 1_700_000_000.0  # seconds since the epoch


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (b" 0 ", 0.0),
        ("1" + "0" * 30, FOREVER),  # 10^30
        ("9" * 5000, FOREVER),  # more digits than Python converts
        (formatdate(NOW + 30, usegmt=True), 30.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", FOREVER),  # 7,975 years away
    ],
)
def test_usable_values(value, seconds):
    assert parse_retry_after(value, NOW).seconds == seconds


def test_the_three_date_forms_of_rfc_9110():
    base = parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 0.0)
    assert base.seconds == 784111777.0
    assert parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", 0.0) == base
    assert parse_retry_after("Sun Nov  6 08:49:37 1994", 0.0) == base  # asctime: GMT


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("-5", "negative"),
        ("", "empty"),
        ("soon", "not a number of seconds nor an HTTP-date"),
        ("1.5", "not a number of seconds nor an HTTP-date"),
        ("١٢", "not a number of seconds nor an HTTP-date"),  # digits, not ASCII
        ("Thu, 01 Jan 1970 00:00:00 GMT", "a date in the past"),
        ("Mon, 99 Foo 2020 99:99:99 GMT", "not a number of seconds nor an HTTP-date"),
    ],
)
def test_unusable_values_say_why(value, problem):
    parsed = parse_retry_after(value, NOW)
    assert parsed.seconds is None
    assert parsed.problem == problem


def test_no_header():
    assert parse_retry_after(None, NOW) is None


def backoff(**options):
    defaults = {
        "start": 10.0,
        "maximum": 600.0,
        "forgive_after": 1800.0,
        "max_retry_after": 3600.0,
        "delay": 1.0,
        "jitter": 0.0,
    }
    return UnitBackoff(**{**defaults, **options})


def test_without_retry_after_the_hold_doubles_per_incident_up_to_the_maximum():
    hosts = backoff()
    now, holds = 0.0, []
    for _ in range(8):
        incident = hosts.incident("a", now, None)
        holds.append(incident.seconds)
        now += incident.seconds  # the next answer comes as the hold ends
    assert holds == [10, 20, 40, 80, 160, 320, 600, 600]


def test_answers_during_a_hold_are_one_incident():
    hosts = backoff()
    assert hosts.incident("a", 0.0, None).new
    during = hosts.incident("a", 5.0, None)
    assert not during.new and during.seconds == 5.0  # the running hold stands
    assert hosts.records["a"].holds == 1
    assert hosts.incident("a", 10.0, None).seconds == 20.0  # the second incident


def test_retry_after_sets_the_hold_and_is_capped():
    hosts = backoff(max_retry_after=60.0)
    assert hosts.incident("a", 0.0, 30.0).seconds == 30.0
    capped = hosts.incident("b", 0.0, 1e30)
    assert capped.capped and capped.seconds == 60.0
    assert hosts.records["b"].largest_retry_after == 1e30


def test_a_quiet_host_is_forgiven_and_backs_off_until_then():
    hosts = backoff(forgive_after=100.0)
    hosts.incident("a", 0.0, None)  # held until 10
    hosts.incident("a", 10.0, None)  # held until 30
    assert hosts.delay("a", 129.0) == 1.0  # backing off: 99 s quiet since its hold ended
    assert hosts.delay("a", 131.0) == 0.0
    assert hosts.incident("a", 131.0, None).seconds == 10.0  # counts as the first again


def test_jitter_only_lengthens_a_hold():
    hosts = backoff(jitter=0.1, rng=random.Random(1))
    holds = [hosts.incident(str(key), 0.0, None).seconds for key in range(100)]
    assert all(10.0 <= hold <= 11.0 for hold in holds)
    assert len(set(holds)) > 50


def test_time_held_counts_each_second_once():
    hosts = backoff()
    hosts.incident("a", 0.0, 30.0)
    hosts.incident("a", 10.0, 30.0)  # extends to 40
    assert hosts.records["a"].held == 40.0
    assert hosts.held_until("a") == 40.0
    assert hosts.held_until("b") == 0.0


def test_a_hold_learnt_from_the_fleet_holds_but_is_not_reported():
    hosts = backoff()
    hosts.learn("a", 0.0, 5.0)
    assert hosts.held_until("a") == 5.0
    assert hosts.delay("a", 6.0) == 1.0
    assert hosts.report(10.0) == []


def test_a_hold_that_outlasts_the_crawl_counts_up_to_its_end():
    hosts = backoff()
    hosts.incident("a", 0.0, 3.0)  # held 0-3
    hosts.incident("a", 10.0, 87.0)  # held 10-97; the crawl ends at 12
    [(key, seconds, record)] = hosts.report(12.0)
    assert (key, seconds, record.holds) == ("a", 5.0, 2)
    assert hosts.report(200.0)[0][1] == 90.0
