"""What a new user gets wrong is said at start-up, as `scrapy crawl` prints it."""

import argparse
import contextlib
import io
import shutil

import pytest
from scrapy.commands.startproject import Command as StartProject
from scrapy.settings import Settings

from tests import processes


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A project as `scrapy startproject newbot` makes it (its command run in this
    process, once for the module; named as no module of the tests is, which
    startproject refuses)."""
    project = tmp_path_factory.mktemp("template") / "newbot"
    command = StartProject()
    command.settings = Settings()
    with contextlib.redirect_stdout(io.StringIO()):
        command.run(["newbot", str(project)], argparse.Namespace())
    assert (project / "scrapy.cfg").exists()
    return project


@pytest.fixture
def new_project(template, tmp_path):
    """``new_project(settings)``: a copy of the template with *settings* appended."""

    def make(settings):
        project = tmp_path / "newbot"
        shutil.copytree(template, project)
        with open(project / "newbot" / "settings.py", "a") as file:
            file.write(settings)
        (project / "newbot" / "spiders" / "empty.py").write_text(
            "import scrapy\n\n\nclass Empty(scrapy.Spider):\n    name = 'empty'\n\n"
            "    async def start(self):\n        return\n        yield\n"
        )
        return project

    return make


def crawl_output(project, status=0):
    result = processes.run("scrapy", "crawl", "empty", cwd=project, timeout=60)
    assert result.returncode == status, result.stderr[-2000:]
    return result.stderr


def test_silent_no_ops_get_a_warning_each(new_project):
    project = new_project(
        '\nADDONS = {"scrapy_rfc9309.Addon": 500}\n'
        'DOMAINBUDGET_POLICY = {"default_policy": {"max_pages_per_day": 3}}\n'
        "DOMAINBUDGET_ENABLE = True\nRFC9309_CACHE_TTLL = 60\n",
    )
    # startproject's template sets ROBOTSTXT_OBEY = True: take it back, as some do.
    settings = project / "newbot" / "settings.py"
    settings.write_text(settings.read_text().replace("ROBOTSTXT_OBEY = True", ""))
    output = crawl_output(project)
    assert "ROBOTSTXT_OBEY is False (Scrapy's default)" in output
    assert "a budget policy is set but DOMAINBUDGET_ENABLED is not" in output
    assert "DOMAINBUDGET_ENABLE is not a setting of scrapy_rfc9309" in output
    assert "did you mean DOMAINBUDGET_ENABLED?" in output
    assert "RFC9309_CACHE_TTLL is not a setting" in output and "RFC9309_CACHE_TTL?" in output


def test_a_correct_project_gets_no_warning(new_project):
    project = new_project('\nADDONS = {"scrapy_rfc9309.Addon": 500}\nROBOTSTXT_OBEY = True\n')
    assert "scrapy_rfc9309:" not in crawl_output(project)


ADDON = '\nADDONS = {"scrapy_rfc9309.Addon": 500}\n'
BUDGET = ADDON + "DOMAINBUDGET_ENABLED = True\n"


@pytest.mark.parametrize(
    ("settings", "policy", "message"),
    [
        (
            ADDON + "RFC9309_TIMEOUT = float('nan')\n",
            None,
            "RFC9309_TIMEOUT must be a finite number",
        ),
        (
            BUDGET + "DOMAINBUDGET_POLICY_FILE = 'policy.yaml'\n",
            "default_policy:\n  max_pages_per_day: [1\n",
            "policy.yaml, line 3: invalid YAML: while parsing a flow sequence: expected",
        ),
        (
            BUDGET + "DOMAINBUDGET_POLICY = {}\nDOMAINBUDGET_STORAGE = 'no.such.Storage'\n",
            None,
            "DOMAINBUDGET_STORAGE",
        ),
        (
            BUDGET + "DOMAINBUDGET_POLICY = {}\nDOMAINBUDGET_SQLITE_PATH = 'policy.yaml'\n",
            "not an SQLite file, " * 300,
            "policy.yaml: file is not a database (move the file aside for a new one, or set "
            "DOMAINBUDGET_SQLITE_PATH)",
        ),
        (
            ADDON + "CRAWLDELAY_ENABLED = 'yes-please'\n",
            None,
            "CRAWLDELAY_ENABLED must be True or False, not 'yes-please'",
        ),
        (
            ADDON + "DOWNLOAD_SLOTS = {'h': {'delay': 'x'}}\n",
            None,
            "DOWNLOAD_SLOTS['h']['delay'] must be a number, not 'x'",
        ),
        (ADDON + "DOWNLOAD_DELAY = -1\n", None, "DOWNLOAD_DELAY must be at least 0, not -1"),
    ],
    ids=[
        "nan",
        "policy-yaml",
        "storage",
        "corrupt-sqlite",
        "not-a-flag",
        "slot-delay",
        "negative-delay",
    ],
)
def test_a_bad_setting_or_policy_is_the_last_line_printed_without_a_traceback(
    new_project, settings, policy, message
):
    """*policy*: the text of the project's file policy.yaml."""
    project = new_project(settings)
    if policy is not None:
        (project / "policy.yaml").write_text(policy)
    output = crawl_output(project, status=1)
    last = output.strip().splitlines()[-1]
    assert "The crawl cannot start: " in last and message in last, output[-3000:]
    assert "Traceback" not in output
    assert "Task exception was never retrieved" not in output
    assert output.count(message) == 1


@pytest.mark.parametrize(
    ("settings", "needs"),
    [
        # The throttle (an extension, built first) says it; the middlewares would too.
        (BUDGET + "DOMAINBUDGET_POLICY = {}\n", "CRAWLDELAY_ENABLED"),
        # Without the throttle, the robots middleware (it used to fail on its first
        # read of the kept copies, with tracebacks, and send no robots.txt request).
        (ADDON + "CRAWLDELAY_ENABLED = False\n", "scrapy_rfc9309.RobotsTxtMiddleware"),
    ],
    ids=["throttle", "robots-middleware"],
)
def test_the_wrong_reactor_is_said_last_and_once_as_a_log_line(new_project, settings, needs):
    """Scrapy runs a non-asyncio reactor through Twisted, whose own stderr printer
    still shows the traceback once; the log says it once, last, with the reactor
    to use."""
    project = new_project(
        settings + "TWISTED_REACTOR = 'twisted.internet.epollreactor.EPollReactor'\n"
    )
    output = crawl_output(project, status=1)
    last = output.strip().splitlines()[-1]
    assert f"The crawl cannot start: {needs}" in last, output[-3000:]
    assert "needs asyncio: Scrapy's default asyncio reactor" in last
    assert output.count("[scrapy_rfc9309] CRITICAL") == 1
    assert output.count("[twisted] CRITICAL") <= 1
