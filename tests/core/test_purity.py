"""The core is pure Python: importing it pulls in neither Scrapy nor Twisted."""

import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import scrapy_rfc9309

PACKAGE = Path(scrapy_rfc9309.__file__).parent
#: Every module of the pure core, subpackages included: the robots.txt model, the
#: budget core and its storages, and the fleet's Redis protocols.
CORE_MODULES = [
    "scrapy_rfc9309._redis",  # the RESP client of the budgets and the fleet
    "scrapy_rfc9309.ledger",  # when a unit may start: the interface, in one process
    *(
        module.name
        for package in ("robots", "budget", "fleet", "backoff")
        for module in pkgutil.walk_packages(
            [str(PACKAGE / package)], prefix=f"scrapy_rfc9309.{package}."
        )
    ),
]


def test_the_core_modules_are_found():
    assert {
        "scrapy_rfc9309.robots._robotstxt",
        "scrapy_rfc9309.budget.policy",
        "scrapy_rfc9309.budget.storage._sqlite",
        "scrapy_rfc9309.fleet.spacing",
        "scrapy_rfc9309.backoff._holds",
    } <= set(CORE_MODULES)


def test_no_core_module_imports_scrapy_or_twisted():
    # One fresh interpreter imports the modules one by one: the first import that
    # brings Scrapy or Twisted in is the module to blame.
    code = (
        "import importlib, sys\n"
        f"for module in {CORE_MODULES!r}:\n"
        "    importlib.import_module(module)\n"
        "    bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted'))\n"
        "    assert not bad, (module, bad[:3])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_public_name_imports():
    for name in scrapy_rfc9309.__all__:
        getattr(scrapy_rfc9309, name)  # raises AttributeError or ImportError if missing


def test_importing_the_package_changes_no_logging():
    code = (
        "import logging, scrapy_rfc9309, scrapy_rfc9309.addon, scrapy_rfc9309._settings\n"
        "import scrapy_rfc9309.downloadermiddlewares.robotstxt\n"
        "for name in ('', 'asyncio', 'twisted', 'scrapy'):\n"
        "    assert not logging.getLogger(name).filters, name\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def import_each_module_then(check: str) -> None:
    """In a fresh interpreter, import the package's modules one by one, and after
    each run *check* (a line of Python; ``info.name`` names the module): the first
    import that fails it is the module to blame."""
    code = (
        "import importlib, pkgutil, sys, scrapy_rfc9309\n"
        "for info in pkgutil.walk_packages(scrapy_rfc9309.__path__, 'scrapy_rfc9309.'):\n"
        "    importlib.import_module(info.name)\n"
        f"    {check}\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_importing_any_module_installs_no_reactor():
    """A settings module that imports the package before Scrapy installs its reactor
    must not get Twisted's default one (the crawl would then fail on the mismatch)."""
    import_each_module_then("assert 'twisted.internet.reactor' not in sys.modules, info.name")


def test_what_only_some_crawls_need_is_imported_when_first_needed():
    """PyYAML (a policy file), http-sf (a usage preference) and difflib (a misspelt
    setting) cost a crawl that needs none of them 2.2 MiB of memory when imported
    with the package: no module imports them at its top."""
    import_each_module_then(
        "assert not {'yaml', 'http_sf', 'difflib'} & set(sys.modules), info.name"
    )


def test_the_scrapy_side_uses_only_the_cores_public_modules():
    """Outside robots/, budget/, fleet/ and backoff/, no module imports a private
    module of theirs (one whose name starts with "_"): each package's API is its
    public modules, robots/'s its __init__."""
    core = ("robots", "budget", "fleet", "backoff")
    private = re.compile(r"from \.+(?:" + "|".join(core) + r")(?:\.[a-z]\w*)*\._\w+ import")
    offenders = [
        f"{path.relative_to(PACKAGE)}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in core
        for line in path.read_text().splitlines()
        if private.search(line)
    ]
    assert offenders == []


PUBLIC_PATHS = [
    # What settings.py files and the README name: they keep working across layouts.
    "scrapy_rfc9309.Addon",
    "scrapy_rfc9309.RobotsTxtMiddleware",
    "scrapy_rfc9309.RobotsTxtDecompressionMiddleware",
    "scrapy_rfc9309.DomainBudgetMiddleware",
    "scrapy_rfc9309.CrawlDelayThrottle",
    "scrapy_rfc9309.PageDirectivesMiddleware",
    "scrapy_rfc9309.StartPaceMiddleware",
    "scrapy_rfc9309.SitemapsFromRobotsMixin",
    "scrapy_rfc9309.RobotParser",
    "scrapy_rfc9309.robotparser.RobotParser",
    "scrapy_rfc9309.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
    "scrapy_rfc9309.downloadermiddlewares.budget.DomainBudgetMiddleware",
    "scrapy_rfc9309.extensions.crawldelay.CrawlDelayThrottle",
    "scrapy_rfc9309.spidermiddlewares.pagedirectives.PageDirectivesMiddleware",
    "scrapy_rfc9309.spidermiddlewares.startpace.StartPaceMiddleware",
    "scrapy_rfc9309.budget.storage.SQLiteStorage",
    "scrapy_rfc9309.budget.storage.RedisStorage",
    "scrapy_rfc9309.budget.storage.MemoryStorage",
    "scrapy_rfc9309.pqueues.HostReadyPriorityQueue",
    "scrapy_rfc9309.redisqueue.HostReadyRedisQueue",
    "scrapy_rfc9309.commands.robots.Command",
    "scrapy_rfc9309.commands.budget.Command",
]


def test_every_public_path_loads():
    from scrapy.utils.misc import load_object

    for path in PUBLIC_PATHS:
        assert load_object(path).__name__ == path.rsplit(".", 1)[1], path
