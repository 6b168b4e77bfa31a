"""``scrapy robots``, run as a user runs it (a process of its own), against a local site.

What never fetches (``--file``, bad input) runs the command in the test process, the
way ``scrapy.cmdline`` does; one subprocess test keeps the ``--file`` path honest on a
real terminal."""

import argparse
import itertools
import json
import os
import subprocess
import sys

import pytest
from scrapy.settings import Settings

from scrapy_rfc9309.commands.robots import Command
from tests import processes
from tests.processes import run_crawl
from tests.server import refused_port

ROBOTS = (
    b"User-agent: *\nDisallow: /private\n\n"
    b"User-agent: DemoBot\nDisallow: /drafts\nAllow: /drafts/published\nCrawl-delay: 1.5\n"
    b"Request-rate: 1/10\nSitemap: http://example.com/sitemap.xml\n"
)


def robots(*args, cwd):
    return processes.run("scrapy", "robots", *args, cwd=cwd, timeout=60)


def robots_without_fetching(*args, capsys, stderr=False):
    """(exit status, stdout) of ``scrapy robots ARGS``, in this process; with
    *stderr*, (exit status, stdout, stderr)."""
    command = Command()
    command.settings = Settings()
    command.settings.setdict(command.default_settings, priority="command")
    parser = argparse.ArgumentParser()
    command.add_options(parser)
    opts, rest = parser.parse_known_args(list(args))
    command.process_options(rest, opts)
    command.run(rest, opts)
    out, err = capsys.readouterr()
    return (command.exitcode, out, err) if stderr else (command.exitcode, out + err)


def test_disallowed_names_the_rule_line_group_delays_and_sitemaps(site, tmp_path):
    site.route("/robots.txt", body=ROBOTS)
    result = robots(f"{site.url}/drafts/x", "--user-agent", "DemoBot", "--show-rules", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "verdict:      DISALLOWED by 'Disallow: /drafts' (line 5)" in out
    assert "group:        User-agent: DemoBot (line 4)" in out  # as the file writes it
    assert "crawl delay:  1.5 s" in out
    assert "request rate: 1/10 s" in out
    assert "sitemaps:     http://example.com/sitemap.xml" in out
    assert "line    6  Allow: /drafts/published" in out
    assert site.paths() == ["/robots.txt"]
    assert site.hits[0].user_agent.startswith("Scrapy/")  # the project's USER_AGENT


def test_allowed_by_a_rule_and_by_no_rule(site, tmp_path):
    site.route("/robots.txt", body=ROBOTS)
    by_rule = robots(f"{site.url}/drafts/published", "--user-agent", "DemoBot", cwd=tmp_path)
    assert by_rule.returncode == 0
    assert "ALLOWED by 'Allow: /drafts/published' (line 6)" in by_rule.stdout
    other_bot = robots(f"{site.url}/drafts/x", "--user-agent", "OtherBot/2.0", cwd=tmp_path)
    assert other_bot.returncode == 0
    assert "crawler:      otherbot" in other_bot.stdout
    assert "ALLOWED (no rule matched)" in other_bot.stdout


def test_a_robots_txt_file_is_read_instead_of_fetched(tmp_path, capsys):
    path = tmp_path / "robots.txt"
    path.write_bytes(b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /a\r\n")
    status, out = robots_without_fetching(
        "https://example.com/a/b", "--file", str(path), capsys=capsys
    )
    assert status == 1
    assert "DISALLOWED by 'Disallow: /a' (line 2)" in out
    assert "group:        User-agent: * (line 1)" in out


def test_a_group_of_several_user_agent_lines_shows_its_first_as_written(tmp_path, capsys):
    path = tmp_path / "robots.txt"
    path.write_bytes(b"user-AGENT:  OtherBot  \nUser-agent: DemoBot/2.0\nDisallow: /a\n")
    _, out = robots_without_fetching(
        "https://example.com/a", "--file", str(path), "--user-agent", "DemoBot", capsys=capsys
    )
    assert "group:        user-AGENT:  OtherBot + 1 more user-agent(s) (line 1)" in out


def test_unreachable_robots_txt_disallows_and_4xx_allows(site, tmp_path):
    site.route("/robots.txt", status=503)
    unreachable = robots(f"{site.url}/a", cwd=tmp_path)
    assert unreachable.returncode == 1
    assert "robots.txt unreachable (HTTP 503): everything disallowed" in unreachable.stdout
    refused_url = f"http://127.0.0.1:{refused_port()}/a"
    refused = robots(refused_url, cwd=tmp_path)
    assert refused.returncode == 2  # nothing to explain: the fetch itself failed
    assert not refused.stdout  # errors go to stderr
    [line] = refused.stderr.splitlines()
    assert line.startswith("error: http://127.0.0.1:") and "Connection refused" in line
    assert line.endswith(f"a crawl would have disallowed {refused_url}")
    fail_open = robots(f"{site.url}/a", "-s", "RFC9309_UNREACHABLE=allow", cwd=tmp_path)
    assert fail_open.returncode == 0
    site.route("/robots.txt", status=404)
    assert robots(f"{site.url}/a", cwd=tmp_path).returncode == 0


def test_redirects_are_followed_to_the_file(site, other_site, tmp_path):
    site.route("/robots.txt", status=301, headers={"Location": f"{other_site.url}/robots.txt"})
    other_site.route("/robots.txt", body=b"User-agent: *\nDisallow: /\n")
    result = robots(f"{site.url}/a", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        f"robots.txt:   {other_site.url}/robots.txt, fetched now (robots.txt fetched (HTTP 200))"
        in result.stdout
    )
    # The way from the URL asked about to the file read.
    assert (
        f"redirects:\n  {site.url}/robots.txt -> 301\n  {other_site.url}/robots.txt -> 200\n"
        in (result.stdout)
    )


def test_a_redirect_loop_is_named_as_the_cause(site, tmp_path):
    site.route("/robots.txt", status=301, headers={"Location": "/loop"})
    site.route("/loop", status=301, headers={"Location": "/robots.txt"})
    result = robots(f"{site.url}/a", cwd=tmp_path)
    assert result.returncode == 0
    assert "(robots.txt unavailable (redirect loop): everything allowed)" in result.stdout


def test_malformed_input_is_an_error_with_status_2_and_a_garbage_file_is_no_error(tmp_path, capsys):
    status, out, err = robots_without_fetching("example.com/a", capsys=capsys, stderr=True)
    assert (status, out) == (2, "")
    assert "error: not an http(s) URL: 'example.com/a'" in err
    status, out = robots_without_fetching(
        "https://example.com/a", "--file", str(tmp_path / "nope"), capsys=capsys
    )
    assert status == 2
    assert "error: cannot read" in out
    garbage = tmp_path / "garbage.txt"
    garbage.write_bytes(b"\x00\xff<html>not robots</html>\nDisallow /x\n")
    status, out = robots_without_fetching(
        "https://example.com/x", "--file", str(garbage), capsys=capsys
    )
    assert status == 0  # rules before any user-agent line are ignored
    assert "none applies" in out


def test_rule_text_that_is_not_utf8_prints_escaped_on_a_strict_utf8_terminal(tmp_path):
    path = tmp_path / "robots.txt"
    path.write_bytes(b"User-agent: *\nDisallow: /caf\xe9\n")  # Latin-1, not UTF-8
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "robots",
            "https://example.com/x",
            "--file",
            str(path),
            "--show-rules",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert result.returncode == 0, result.stderr
    assert "Disallow: /caf\\udce9" in result.stdout


def keep_a_copy(site, tmp_path, **settings):
    """Crawl *site* once, so that its robots.txt (ROBOTS) is kept; the cache's path."""
    cache = str(tmp_path / "robots.sqlite")
    site.route("/robots.txt", body=ROBOTS)
    settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": True,
        "RFC9309_PERSISTENT_CACHE_PATH": cache,
        **settings,
    }
    run_crawl(json.dumps(settings), f"{site.url}/page").check_returncode()
    return cache


def test_in_a_scrapy_redis_project_the_copy_is_read_where_its_fleet_keeps_it(
    site, fleet_redis, tmp_path, capsys
):
    """A scrapy-redis project with the add-on and no ``FLEET_REDIS_URL``: its crawls
    keep robots.txt in scrapy-redis's Redis, and so the command reads it there (its
    settings do not go through the add-on); with ``FLEET_REDIS_URL = False``, in
    this machine's file, where such a project's crawls keep it."""
    keep_a_copy(site, tmp_path, FLEET_REDIS_URL=fleet_redis)
    project = (
        "-s",
        f"ADDONS={json.dumps({'scrapy_rfc9309.Addon': 500})}",
        "-s",
        "SCHEDULER=scrapy_redis.scheduler.Scheduler",
        "-s",
        f"REDIS_URL={fleet_redis}",
        "-s",
        f"RFC9309_PERSISTENT_CACHE_PATH={tmp_path / 'other.sqlite'}",
    )
    status, out = robots_without_fetching(
        f"{site.url}/private/x", "--cached", *project, capsys=capsys
    )
    assert status == 1, out
    assert f"robots.txt:   the copy kept in {fleet_redis}, fetched" in out
    assert "DISALLOWED by 'Disallow: /private' (line 2)" in out
    assert site.count("/robots.txt") == 1  # read, not fetched
    off = ("-s", "FLEET_REDIS_URL=False")
    status, out = robots_without_fetching(
        f"{site.url}/private/x", "--cached", *project, *off, capsys=capsys
    )
    assert status == 2 and f"no copy of {site.url}/robots.txt is kept in " in out, out
    assert "other.sqlite" in out


def test_cached_reads_the_copy_a_crawl_kept_without_fetching(site, tmp_path, capsys):
    cache = keep_a_copy(site, tmp_path)
    args = ("--cached", "-s", f"RFC9309_PERSISTENT_CACHE_PATH={cache}")
    status, out = robots_without_fetching(f"{site.url}/private/x", *args, capsys=capsys)
    assert status == 1, out
    assert f"robots.txt:   the copy kept in {cache}, fetched" in out and "(fresh:" in out
    assert "DISALLOWED by 'Disallow: /private' (line 2)" in out
    assert site.count("/robots.txt") == 1  # read, not fetched
    other = f"http://127.0.0.1:{refused_port()}/x"
    status, out = robots_without_fetching(other, *args, capsys=capsys)
    assert status == 2 and "no copy of" in out
    # The running command's RFC9309_CACHE_TTL decides whether the copy is fresh.
    short = (*args, "-s", "RFC9309_CACHE_TTL=0.001")
    status, out = robots_without_fetching(f"{site.url}/private/x", *short, capsys=capsys)
    assert "(expired: a crawl refreshes it;" in out


def test_by_default_the_fresh_kept_copy_is_used_as_a_crawl_would_and_live_fetches(site, tmp_path):
    cache = keep_a_copy(site, tmp_path)
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /\n")  # changed since
    path = ("-s", f"RFC9309_PERSISTENT_CACHE_PATH={cache}")
    kept = robots(f"{site.url}/x", *path, cwd=tmp_path)
    assert kept.returncode == 0, kept.stdout + kept.stderr  # the kept copy allows /x
    assert f"robots.txt:   the copy kept in {cache}" in kept.stdout
    assert site.count("/robots.txt") == 1
    expired = robots(f"{site.url}/x", *path, "-s", "RFC9309_CACHE_TTL=0.001", cwd=tmp_path)
    assert expired.returncode == 1  # a crawl would fetch it again: so does the command
    assert "fetched now" in expired.stdout
    live = robots(f"{site.url}/x", *path, "--live", cwd=tmp_path)
    assert live.returncode == 1 and "fetched now" in live.stdout
    assert site.count("/robots.txt") == 3


def test_bad_urls_and_option_pairs_are_one_line_errors_with_status_2(tmp_path, capsys):
    status, out, err = robots_without_fetching("http://[::1/a", capsys=capsys, stderr=True)
    assert (status, out) == (2, "")
    assert err.startswith("error: not a valid URL: 'http://[::1/a'") and err.count("\n") == 1
    status, out, err = robots_without_fetching("http://h:99999/a", capsys=capsys, stderr=True)
    assert status == 2 and "not a valid URL" in err
    path = tmp_path / "robots.txt"
    path.write_bytes(b"User-agent: *\nDisallow: /\n")
    for other in ("--cached", "--live"):
        status, out, err = robots_without_fetching(
            "http://example.com/a", "--file", str(path), other, capsys=capsys, stderr=True
        )
        assert status == 2 and "without --cached or --live" in err, other
    status, out, err = robots_without_fetching(
        "http://example.com/a", "--cached", "--live", capsys=capsys, stderr=True
    )
    assert status == 2 and "exclude each other" in err


def robots_in_a_deployment(url, settings, directory, package_code="", options=()):
    """``scrapy robots URL OPTIONS`` run in *directory* with the settings module
    ``deployed.settings`` (its text *settings*, the package's *package_code*) on
    ``PYTHONPATH``, and no scrapy.cfg."""
    package = directory / "deployed"
    package.mkdir()
    (package / "__init__.py").write_text(package_code)
    (package / "settings.py").write_text(settings)
    env = {
        **os.environ,
        "SCRAPY_SETTINGS_MODULE": "deployed.settings",
        "PYTHONPATH": os.pathsep.join([str(directory), os.getcwd()]),
    }
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "robots", url, *options],
        capture_output=True,
        text=True,
        cwd=directory,
        env=env,
        timeout=60,
    )


def test_a_settings_module_without_scrapy_cfg_keeps_copies_in_the_current_directory(site, tmp_path):
    """A deployment with its settings module on PYTHONPATH and no scrapy.cfg: Scrapy's
    data_path() refuses to name a project data directory there."""
    settings = "ADDONS = {'scrapy_rfc9309.Addon': 500}\nROBOTSTXT_OBEY = True\n"
    site.route("/robots.txt", body=ROBOTS)
    result = robots_in_a_deployment(f"{site.url}/private/x", settings, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "DISALLOWED by 'Disallow: /private'" in result.stdout


@pytest.mark.parametrize("where", ["settings.py", "-s"])
def test_the_fetch_leaves_the_projects_scheduler_job_pipelines_and_feeds_alone(
    site, tmp_path, where
):
    """Of the project's crawl, the command's fetch uses only the download path,
    whether the project's settings are in settings.py or given with ``-s``: a
    scrapy-redis scheduler and dupefilter whose Redis does not answer do not stop it
    (the fetch used to open them, and failed: "the crawler did not start"); a
    ``JOBDIR`` keeps its paused crawl's state, and a feed's file its items (the fetch
    used to write its own state over the one, an empty feed over the other); no
    item pipeline is opened."""
    pipeline = (
        "class Pipeline:\n"
        "    def open_spider(self, spider=None):\n"
        f"        open({str(tmp_path / 'opened')!r}, 'w').close()\n"
    )
    job = tmp_path / "job"
    job.mkdir()
    (job / "spider.state").write_bytes(b"the paused crawl's state")
    items = tmp_path / "items.jsonl"
    items.write_text('{"an": "item"}\n')
    project = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "REDIS_URL": f"redis://127.0.0.1:{refused_port()}/0",
        "JOBDIR": str(job),
        "FEEDS": {str(items): {"format": "jsonlines", "overwrite": True}},
        "ITEM_PIPELINES": {"deployed.Pipeline": 300},
    }
    settings = "ADDONS = {'scrapy_rfc9309.Addon': 500}\nROBOTSTXT_OBEY = True\n"
    options = []
    for name, value in project.items():
        if where == "settings.py":
            settings += f"{name} = {value!r}\n"
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            options += ["-s", f"{name}={text}"]
    site.route("/robots.txt", body=ROBOTS)
    result = robots_in_a_deployment(f"{site.url}/private/x", settings, tmp_path, pipeline, options)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "fetched now" in result.stdout
    assert "DISALLOWED by 'Disallow: /private'" in result.stdout
    assert site.count("/robots.txt") == 1
    assert [path.name for path in job.iterdir()] == ["spider.state"]
    assert (job / "spider.state").read_bytes() == b"the paused crawl's state"
    assert items.read_text() == '{"an": "item"}\n'
    assert not (tmp_path / "opened").exists()


def test_the_preferences_that_apply_to_the_url_are_shown_with_their_lines(tmp_path, capsys):
    path = tmp_path / "robots.txt"
    path.write_bytes(
        b"User-agent: *\nContent-Usage: / train-ai=n\nContent-Usage: /ok/ train-ai=y\n"
        b"Content-Signal: search=yes\n"
    )
    args = ("--file", str(path), "--user-agent", "Bot")
    status, out = robots_without_fetching("http://example.com/ok/1", *args, capsys=capsys)
    assert status == 0
    assert "preferences:  line 3: Content-Usage: /ok/ train-ai=y" in out
    assert "preferences:  line 4: Content-Signal: search=yes" in out
    status, out = robots_without_fetching("http://example.com/x", *args, capsys=capsys)
    assert "preferences:  line 2: Content-Usage: / train-ai=n" in out


@pytest.mark.parametrize("module", ["robots", "budget"])
def test_the_help_shows_only_its_own_headings_at_any_terminal_width(module):
    """Scrapy's help formatter takes a help line ending with ``:`` for a heading
    (title-cased and underlined): an option's help must read right however the
    terminal wraps it (``(default: ...`` at a line's end did not)."""
    import importlib

    from scrapy.commands import ScrapyHelpFormatter

    command = importlib.import_module(f"scrapy_rfc9309.commands.{module}").Command()
    command.settings = Settings()
    for width in range(40, 200):
        parser = argparse.ArgumentParser(
            formatter_class=lambda prog, width=width: ScrapyHelpFormatter(prog, width=width),
            usage=f"scrapy {module} {command.syntax()}",
            conflict_handler="resolve",
        )
        command.add_options(parser)
        lines = parser.format_help().splitlines()
        underlined = itertools.pairwise(lines)
        headings = [above for above, line in underlined if set(line) in ({"="}, {"-"})]
        # (Scrapy's own options come after: its --loglevel has the flaw at width 40.)
        ours = headings[: headings.index("Global Options")]
        assert ours == ["Usage", "Options"], (width, ours)
