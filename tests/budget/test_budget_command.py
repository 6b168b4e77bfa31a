"""``scrapy budget``, run as a user runs it (a process of its own), on a real SQLite
file."""

import re

from scrapy_rfc9309.budget.storage import SQLiteStorage
from tests import processes

DAY = "2026-11-22"


def scrapy(*args, cwd):
    return processes.run("scrapy", *args, cwd=cwd, timeout=60)


def test_budget_shows_usage_and_resets_a_domain(tmp_path):
    db = tmp_path / "budget.sqlite"
    store = SQLiteStorage(db)
    for _ in range(3):
        store.reserve("wikipedia.org", DAY, 0, 0)
    store.release_page("wikipedia.org", DAY)
    store.close()
    common = ["-s", f"DOMAINBUDGET_SQLITE_PATH={db}", "--day", DAY]

    shown = scrapy("budget", *common, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"Daily budgets on {DAY}, from SQLite {db}" in shown.stdout  # which store
    line = next(line for line in shown.stdout.splitlines() if "wikipedia.org" in line)
    assert line.split() == [
        "wikipedia.org",
        "requests",
        "3",
        "/",
        "200",
        "(197",
        "left)",
        "pages",
        "2",
        "/",
        "100",
        "(98",
        "left)",
    ]

    reset = scrapy("budget", *common, "--reset", "en.wikipedia.org", cwd=tmp_path)
    assert "Reset the budget of wikipedia.org" in reset.stdout
    assert "(nothing recorded" in scrapy("budget", *common, cwd=tmp_path).stdout
    # A day older than those a store keeps: said why nothing shows.
    old = scrapy("budget", *common[:-1], "2000-01-01", cwd=tmp_path).stdout
    assert re.search(r"\(nothing recorded; days before \d{4}-\d\d-\d\d are not kept\)", old), old


def test_budget_shows_and_resets_a_fleets_budget_in_redis(tmp_path, fleet_redis):
    """A fleet's budgets (``RedisStorage``): the command reads and resets them in
    the fleet's Redis, naming it, and creates no SQLite file."""
    from scrapy_rfc9309.budget.storage import RedisStorage

    store = RedisStorage(fleet_redis)
    for _ in range(2):
        store.reserve("example.org", DAY, 0, 0)
    store.close()
    common = [
        "-s",
        "DOMAINBUDGET_STORAGE=scrapy_rfc9309.budget.storage.RedisStorage",
        "-s",
        f"DOMAINBUDGET_REDIS_URL={fleet_redis}",
        "--day",
        DAY,
    ]
    shown = scrapy("budget", *common, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"Daily budgets on {DAY}, from Redis {fleet_redis}" in shown.stdout
    line = next(line for line in shown.stdout.splitlines() if "example.org" in line)
    assert line.split()[:4] == ["example.org", "requests", "2", "/"]
    reset = scrapy("budget", *common, "--reset", "www.example.org", cwd=tmp_path)
    assert "Reset the budget of example.org" in reset.stdout, reset.stdout + reset.stderr
    assert "(nothing recorded" in scrapy("budget", *common, cwd=tmp_path).stdout
    assert not list(tmp_path.rglob("*.sqlite"))


def test_budget_reports_a_bad_policy_with_exit_status_2(tmp_path):
    policy = tmp_path / "domains.yaml"
    policy.write_text("default_policy:\n  max_pages_per_day: lots\n")
    result = scrapy("budget", "-s", f"DOMAINBUDGET_POLICY_FILE={policy}", cwd=tmp_path)
    assert result.returncode == 2
    assert "line 2: default_policy.max_pages_per_day" in result.stderr  # errors: stderr
    assert not result.stdout


def test_a_day_that_does_not_exist_is_refused(tmp_path):
    result = scrapy("budget", "--day", "2026-02-30", cwd=tmp_path)
    assert result.returncode == 2
    assert "--day 2026-02-30: no such date" in result.stderr
    result = scrapy("budget", "--day", "30/02/2026", cwd=tmp_path)
    assert result.returncode == 2
    assert "--day must be a date written YYYY-MM-DD, not '30/02/2026'" in result.stderr


def test_reset_takes_a_url_or_host_and_port_and_says_when_nothing_was_recorded(tmp_path):
    db = tmp_path / "budget.sqlite"
    store = SQLiteStorage(db)
    store.reserve("127.0.0.1", DAY, 0, 0)
    store.reserve("example.org", DAY, 0, 0)
    store.close()
    common = ["-s", f"DOMAINBUDGET_SQLITE_PATH={db}", "--day", DAY]
    for given, key in (
        ("http://127.0.0.1:8771/", "127.0.0.1"),
        ("www.example.org:8080", "example.org"),
    ):
        reset = scrapy("budget", *common, "--reset", given, cwd=tmp_path)
        assert reset.returncode == 0, reset.stderr
        assert f"Reset the budget of {key} for {DAY} (it had 1 requests, 1 pages)." in reset.stdout
    assert "(nothing recorded" in scrapy("budget", *common, cwd=tmp_path).stdout
    never = scrapy("budget", *common, "--reset", "example.com", cwd=tmp_path)
    assert never.returncode == 0
    assert f"Nothing recorded for example.com on {DAY}: nothing to reset." in never.stdout
    for bad_domain in ("not a domain", ""):
        bad = scrapy("budget", *common, "--reset", bad_domain, cwd=tmp_path)
        assert bad.returncode == 2 and "--reset:" in bad.stderr, bad_domain


def test_the_table_columns_line_up(tmp_path):
    db = tmp_path / "budget.sqlite"
    store = SQLiteStorage(db)
    for domain, count in (("a.org", 1), ("a-much-longer-name.example.org", 123)):
        for _ in range(count):
            store.reserve(domain, DAY, 0, 0)
    store.close()
    shown = scrapy("budget", "-s", f"DOMAINBUDGET_SQLITE_PATH={db}", "--day", DAY, cwd=tmp_path)
    rows = [line for line in shown.stdout.splitlines() if "requests" in line]
    assert len(rows) == 2
    assert len({row.index("requests") for row in rows}) == 1
    assert len({row.index("pages") for row in rows}) == 1


def test_outside_a_project_it_creates_no_store(tmp_path):
    result = scrapy("budget", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    store = tmp_path / ".scrapy" / "domainbudget.sqlite"
    assert f"No budget store at {store}: nothing recorded." in result.stdout
    assert not (tmp_path / ".scrapy").exists()
    reset = scrapy("budget", "--reset", "example.com", cwd=tmp_path)
    assert reset.returncode == 0 and not (tmp_path / ".scrapy").exists()
