"""Every snippet of the README and of docs/ is exercised: the ``>>>`` examples by doctest, each
Python settings block by a real (empty) crawl with those settings, the policy YAML
by the policy loader, the shell commands by running them."""

import doctest
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_twisted
import scrapy
from scrapy.crawler import CrawlerRunner
from scrapy.downloadermiddlewares.robotstxt import (
    RobotsTxtMiddleware as BuiltinRobotsTxtMiddleware,
)

import scrapy_rfc9309
from scrapy_rfc9309 import (
    DomainBudgetMiddleware,
    RobotsTxtDecompressionMiddleware,
    RobotsTxtMiddleware,
)
from scrapy_rfc9309.budget.policy import BudgetPolicy

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README = (ROOT / "README.md").read_text()
#: The README and docs/, one text: the snippets and their outputs are looked up in it.
TEXT = "\n".join(path.read_text() for path in DOCUMENTS)
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", TEXT, re.MULTILINE | re.DOTALL)


def blocks(language):
    return [body for lang, body in BLOCKS if lang == language]


def test_the_interactive_examples():
    attempted = 0
    for path in DOCUMENTS:
        result = doctest.testfile(str(path), module_relative=False, verbose=False)
        assert result.failed == 0, path
        attempted += result.attempted
    assert attempted >= 6


def test_the_readme_is_a_manual_and_links_what_exists():
    assert len(README.splitlines()) <= 300
    for link in re.findall(r"\]\((docs/[\w.-]+\.md)", README):
        assert (ROOT / link).exists(), link


class NoRequests(scrapy.Spider):
    name = "readme"

    async def start(self):
        return
        yield


@pytest.mark.parametrize("snippet", blocks("python"))
@pytest_twisted.ensureDeferred
async def test_each_settings_snippet_starts_a_crawl(snippet, tmp_path, monkeypatch, redis_server):
    namespace: dict = {}
    exec(snippet, namespace)
    settings = {name: value for name, value in namespace.items() if name.isupper()}
    spiders = [
        v for v in namespace.values() if isinstance(v, type) and issubclass(v, scrapy.Spider)
    ]
    if spiders:  # the fleet recipe's RedisSpider, or the SitemapSpider recipe
        from scrapy.spiders import SitemapSpider
        from scrapy_redis.spiders import RedisSpider

        from scrapy_rfc9309 import SitemapsFromRobotsMixin

        for spider in spiders:
            if spider.__module__.startswith(("scrapy.", "scrapy_redis.")):
                continue  # imported by the snippet, not defined
            if issubclass(spider, SitemapsFromRobotsMixin):
                assert issubclass(spider, SitemapSpider), snippet
                assert spider.start is SitemapsFromRobotsMixin.start  # first in the MRO
            else:
                assert issubclass(spider, RedisSpider), snippet
        return
    assert settings, snippet
    for name in settings:  # the snippets' Redis servers are the test's
        if name.endswith("REDIS_URL"):
            settings[name] = redis_server.url
    # Relative paths in the snippets are a project's: config/domains.yaml, .scrapy/.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "example_project" / "config" / "domains.yaml", tmp_path / "config")
    crawler = CrawlerRunner({**settings, "TELNETCONSOLE_ENABLED": False}).create_crawler(NoRequests)
    await crawler.crawl()
    assert crawler.stats.get_value("finish_reason") == "finished"
    enabled = {type(m) for m in crawler.engine.downloader.middleware.middlewares}
    if settings.get("ROBOTSTXT_PARSER"):  # Scrapy's middleware, with our parser
        assert BuiltinRobotsTxtMiddleware in enabled
    elif crawler.settings.getbool("ROBOTSTXT_OBEY"):
        assert {RobotsTxtMiddleware, RobotsTxtDecompressionMiddleware} <= enabled
        assert BuiltinRobotsTxtMiddleware not in enabled
    if settings.get("DOMAINBUDGET_ENABLED"):
        assert DomainBudgetMiddleware in enabled


def test_the_policy_yaml(tmp_path):
    (yaml_block,) = blocks("yaml")
    path = tmp_path / "domains.yaml"
    path.write_text(yaml_block)
    policy = BudgetPolicy.from_file(path)
    assert policy.limits_for("en.wikipedia.org").key == "wikipedia.org"


@pytest.mark.subprocess
def test_the_shell_commands():
    makefile = (ROOT / "Makefile").read_text()
    commands = [line.split("#")[0].strip() for body in blocks("sh") for line in body.splitlines()]
    for command in filter(None, commands):
        words = shlex.split(command)
        if words[0] == "make":
            assert re.search(rf"^{words[1]}:", makefile, re.MULTILINE), command
        elif words[0] == "scrapy":
            # The explain example: its output is the plain block that follows it.
            result = subprocess.run(
                [sys.executable, "-m", "scrapy", *words[1:]], cwd=ROOT, capture_output=True
            )
            expected = TEXT.split(f"{command}\n```\n\n```\n", 1)[1].split("```", 1)[0]
            assert result.stdout.decode() == expected
        elif words[:2] == ["pip", "install"]:
            # Installing is tests/test_wheel.py's; here the names: the extras exist,
            # and the wheel named is the one `make wheel` builds for this version.
            target = words[-1]
            extras = re.findall(r"\[(\w+)\]", target)
            setup = (ROOT / "setup.cfg").read_text()
            assert all(re.search(rf"^{extra} =$", setup, re.MULTILINE) for extra in extras)
            if target.startswith("dist/"):
                version = scrapy_rfc9309.__version__
                assert target.split("[")[0] == f"dist/scrapy_rfc9309-{version}-py3-none-any.whl"
        else:
            pytest.fail(f"README command not covered by a test: {command}")
