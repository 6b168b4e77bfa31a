"""The budget policy: schema, errors naming file/line/field, domains, days."""

import re
import textwrap
import time
from datetime import datetime, timezone

import pytest

from scrapy_rfc9309.budget.policy import (
    BudgetPolicy,
    PolicyError,
    day_of,
    registrable_domain,
    zone,
)

SAMPLE_POLICY = """\
default_policy:
  qps: 0.2
  max_requests_per_day: 200
  max_pages_per_day: 100

allowlist:
  - domain: "wikipedia.org"
    domain_category: "trusted"
    max_requests_per_day: 500
    max_pages_per_day: 250
"""


def write(tmp_path, text):
    path = tmp_path / "domains.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_sample_policy_file(tmp_path):
    policy = BudgetPolicy.from_file(write(tmp_path, SAMPLE_POLICY))
    wiki = policy.limits_for("en.wikipedia.org")
    assert (wiki.key, wiki.max_requests_per_day, wiki.max_pages_per_day) == (
        "wikipedia.org",
        500,
        250,
    )
    assert wiki.category == "trusted"
    assert wiki.delay == 5.0, "inherits the default qps 0.2 -> 5 s"
    other = policy.limits_for("www.example.co.uk")
    assert (other.key, other.max_requests_per_day, other.max_pages_per_day) == (
        "example.co.uk",
        200,
        100,
    )


def test_inline_dict_is_the_same_structure():
    policy = BudgetPolicy.from_dict(
        {
            "default_policy": {"max_requests_per_day": 10, "max_pages_per_day": 0},
            "allowlist": [{"domain": "example.com", "delay": 2}],
        }
    )
    limits = policy.limits_for("shop.example.com")
    assert (limits.key, limits.max_requests_per_day, limits.max_pages_per_day, limits.delay) == (
        "example.com",
        10,
        0,
        2.0,
    )


def test_defaults_without_a_policy_are_200_requests_and_100_pages():
    limits = BudgetPolicy.defaults().limits_for("a.example.org")
    assert (limits.max_requests_per_day, limits.max_pages_per_day, limits.delay) == (200, 100, None)


def test_most_specific_entry_wins():
    policy = BudgetPolicy.from_dict(
        {
            "allowlist": [
                {"domain": "wikipedia.org", "max_pages_per_day": 5},
                {"domain": "en.wikipedia.org", "max_pages_per_day": 7},
            ]
        }
    )
    assert policy.limits_for("fr.wikipedia.org").max_pages_per_day == 5
    assert policy.limits_for("a.en.wikipedia.org").key == "en.wikipedia.org"
    assert policy.limits_for("notwikipedia.org").key == "notwikipedia.org"


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("en.wikipedia.org", "wikipedia.org"),
        ("a.b.example.co.uk", "example.co.uk"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("localhost", "localhost"),
        ("WWW.Example.COM.", "example.com"),
        ("co.uk", "co.uk"),
    ],
)
def test_unlisted_hosts_are_counted_per_registrable_domain_offline(host, key):
    assert registrable_domain(host) == key
    assert BudgetPolicy.defaults().limits_for(host).key == key


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("default_policy:\n  max_pages_per_dai: 3\n", 2, "default_policy.max_pages_per_dai"),
        ("default_policy:\n  max_pages_per_day: -1\n", 2, "default_policy.max_pages_per_day"),
        ("default_policy:\n  max_pages_per_day: many\n", 2, "default_policy.max_pages_per_day"),
        ("default_policy:\n  qps: 0\n", 2, "default_policy.qps"),
        ("allowlist:\n  - domain: a.com\n    delay: -2\n", 3, "allowlist.0.delay"),
        ("allowlist:\n  - max_pages_per_day: 3\n", 2, "allowlist.0.domain"),
        ("allowlist:\n  - domain: a.com\n    colour: red\n", 3, "allowlist.0.colour"),
        ("allowlist: wikipedia.org\n", 1, "allowlist"),
        ("budget: 3\n", 1, "budget"),
    ],
)
def test_malformed_policy_file_names_file_line_and_field(tmp_path, text, line, field):
    path = write(tmp_path, text)
    with pytest.raises(PolicyError) as error:
        BudgetPolicy.from_file(path)
    message = str(error.value)
    assert message.startswith(f"{path}, line {line}: {field}:"), message


def test_bad_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "default_policy:\n  max_pages_per_day: [1\n")
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(path))}, line \d+: invalid YAML"):
        BudgetPolicy.from_file(path)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(PolicyError, match=r"nope\.yaml: cannot read"):
        BudgetPolicy.from_file(tmp_path / "nope.yaml")


def test_malformed_inline_policy_names_the_setting_and_field():
    with pytest.raises(
        PolicyError, match=r"^DOMAINBUDGET_POLICY: default_policy.max_requests_per_day:"
    ):
        BudgetPolicy.from_dict({"default_policy": {"max_requests_per_day": 1.5}})
    with pytest.raises(PolicyError, match=r"^DOMAINBUDGET_POLICY: \(top level\)"):
        BudgetPolicy.from_dict(["not", "a", "mapping"])


def test_day_is_the_calendar_day_in_the_time_zone():
    moment = datetime(2026, 11, 22, 23, 30, tzinfo=timezone.utc).timestamp()
    assert day_of(moment, zone("UTC")) == "2026-11-22"
    assert day_of(moment, zone("Asia/Tokyo")) == "2026-11-23"
    assert day_of(moment, zone("America/Los_Angeles")) == "2026-11-22"
    with pytest.raises(PolicyError, match="DOMAINBUDGET_TIMEZONE"):
        zone("Mars/Olympus_Mons")


def test_an_entry_naming_an_ip_or_localhost_covers_exactly_that_host():
    policy = BudgetPolicy.from_dict(
        {"allowlist": [{"domain": "127.0.0.1", "max_pages_per_day": 8}, {"domain": "0.1"}]}
    )
    assert policy.limits_for("127.0.0.1").max_pages_per_day == 8
    assert policy.limits_for("10.0.0.1").key == "10.0.0.1"  # "0.1" is no parent of an IP
    assert policy.limits_for("10.0.0.1").max_pages_per_day == 100


BOMB = (
    'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
)


@pytest.mark.parametrize(
    "text, message",
    [
        (BOMB, r"line 2: YAML aliases are not allowed"),  # expanded for minutes before
        ("b: &b {max_pages_per_day: 3}\ndefault_policy:\n  <<: *b\n", r"line 3: YAML aliases"),
        ("default_policy: !!python/object/apply:os.system [x]\n", r"line 1: YAML tags"),
        ("default_policy:\n  max_pages_per_day: 3\n  max_pages_per_day: 5\n", r"line 3: .*dup"),
        ("default_policy:\n  max_pages_per_day: 2026-13-45\n", r"line 2: invalid value"),
        ("default_policy:\n  max_pages_per_day: 100000000000000000000\n", r"line 2: .*from 0"),
        ("default_policy:\n  qps: 0.000001\n", r"line 2: default_policy.qps: asks for more"),
    ],
)
def test_unsafe_or_absurd_yaml_is_refused_quickly_naming_the_line(tmp_path, text, message):
    start = time.perf_counter()
    with pytest.raises(PolicyError, match=message):
        BudgetPolicy.from_file(write(tmp_path, text))
    assert time.perf_counter() - start < 1  # a generous guard: the bomb never expands


def test_a_utf16_or_oversized_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "domains.yaml"
    path.write_bytes("default_policy: {}\n".encode("utf-16"))
    with pytest.raises(PolicyError, match=r"domains\.yaml: not UTF-8"):
        BudgetPolicy.from_file(path)
    path.write_text("# filler\n" * 200_000)
    with pytest.raises(PolicyError, match=r"domains\.yaml: 1,800,000 bytes"):
        BudgetPolicy.from_file(path)


def test_empty_values_read_as_unset(tmp_path):
    policy = BudgetPolicy.from_file(write(tmp_path, "default_policy:\n  qps:\nallowlist:\n"))
    assert policy.limits_for("a.com").delay is None


@pytest.mark.parametrize("field, value", [("qps", 1e-320), ("max_pages_per_day", 10**20)])
def test_absurd_inline_numbers_are_refused(field, value):
    with pytest.raises(PolicyError, match=f"default_policy.{field}"):
        BudgetPolicy.from_dict({"default_policy": {field: value}})


def test_a_relative_policy_file_is_the_projects_from_any_directory(tmp_path, monkeypatch):
    from scrapy.settings import Settings

    from scrapy_rfc9309.downloadermiddlewares.budget._setup import load_policy

    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = demo.settings\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "domains.yaml").write_text("default_policy:\n  max_pages_per_day: 7\n")
    (tmp_path / "demo" / "spiders").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "demo" / "spiders")
    policy = load_policy(Settings({"DOMAINBUDGET_POLICY_FILE": "config/domains.yaml"}))
    assert policy.limits_for("a.com").max_pages_per_day == 7


@pytest.mark.parametrize(
    ("value", "instead"),
    [
        ("http://127.0.0.2:8702/", "write domain: 127.0.0.2"),
        ("https://en.wikipedia.org/wiki", "write domain: en.wikipedia.org"),
        ("127.0.0.1:8701", "write domain: 127.0.0.1"),
        ("example.com:443", "write domain: example.com"),
        ("[::1]:8080", "write domain: ::1"),
        ("exa mple.com", "must be a domain name like 'example.com'"),
    ],
)
def test_a_domain_written_as_a_url_or_with_a_port_is_refused_saying_what_to_write(
    tmp_path, value, instead
):
    # Such a value was accepted and never matched a host: a budget that silently did nothing.
    path = write(tmp_path, f"allowlist:\n  - domain: {value!r}\n    max_pages_per_day: 3\n")
    with pytest.raises(PolicyError) as error:
        BudgetPolicy.from_file(path)
    message = str(error.value)
    assert message.startswith(f"{path}, line 2: allowlist.0.domain: "), message
    assert instead in message


@pytest.mark.parametrize("value", ["example.com", "*.example.com", "127.0.0.1", "::1", "[::1]"])
def test_host_names_and_addresses_are_domains(value):
    policy = BudgetPolicy.from_dict({"allowlist": [{"domain": value, "max_pages_per_day": 3}]})
    assert len(policy.entries) == 1


@pytest.mark.parametrize(
    "text", ["? [a, b]\n: 1\n", "default_policy:\n  ? {x: 1}\n  : 3\n"], ids=["list", "map"]
)
def test_a_complex_yaml_key_is_refused_naming_the_line(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(path))}, line \d+: .*keys must be"):
        BudgetPolicy.from_file(path)
