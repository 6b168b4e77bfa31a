"""``scrapy robots URL``: may the crawler fetch URL, and which rule of which line decides.

Uses the robots.txt a crawl would use now: the copy crawls keep across restarts
while it is younger than ``RFC9309_CACHE_TTL``, else ``{scheme}://{authority}/robots.txt``
fetched (``--live`` always fetches, ``--cached`` reads the kept copy even when
expired, ``--file`` reads a file).  A fetch goes the way a crawl's does: through
Scrapy's downloader with the project's settings and the robots middleware's fetch
(redirects to http/https only, up to ``RFC9309_MAX_REDIRECTS``; ``RFC9309_TIMEOUT``
for the whole fetch; at most ``RFC9309_MAX_BYTES`` of decoded text; 4xx = everything
allowed, 429/5xx = ``RFC9309_UNREACHABLE``).

Exit status: 0 allowed, 1 disallowed, 2 error (bad input, or robots.txt could not
be fetched at all: a crawl would then apply ``RFC9309_UNREACHABLE``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy import Spider
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.settings import BaseSettings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from .._redis import redacted_url
from .._settings import (
    ROBOTS_DEFAULTS,
    RobotsSettings,
    SettingError,
    fleet_off,
    with_defaults,
)
from ..addon import Addon
from ..downloadermiddlewares.robotstxt._fetch import Fetched, RobotsFetcher, entry_for, parse_now
from ..robots import (
    FetchOutcome,
    RedisRobotsStore,
    RobotsEntry,
    RobotsTxt,
    SQLiteRobotsStore,
    StoredRobots,
    StoreError,
    decode,
    product_token,
    split_lines,
)

ALLOWED, DISALLOWED, ERROR = 0, 1, 2


class _FetchSpider(Spider):
    """Fetches one robots.txt with the crawl's fetch path, then closes."""

    name = "rfc9309-robots"
    custom_settings = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "ROBOTSTXT_OBEY": False,  # the fetcher is used directly
        "DOMAINBUDGET_ENABLED": False,
        "CRAWLDELAY_ENABLED": False,
    }
    #: Of the project's crawl, only its download path (downloader middlewares,
    #: handlers), whether set in settings.py or with ``-s``: the fetch downloads
    #: without scheduling, so Scrapy's own scheduler and no dupefilter (a scrapy-redis
    #: one needs its Redis); outside the project's job (its paused crawl's state
    #: stays as it is); no item pipeline, extension of the project's or feed
    #: (Scrapy's feed exporter would write an empty feed over the project's file).
    download_path_only = {
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter",
        "JOBDIR": None,
        "ITEM_PIPELINES": {},
        "EXTENSIONS": {"scrapy.extensions.feedexport.FeedExporter": None},
    }
    authority: str
    config: RobotsSettings
    results: list[Fetched | BaseException]

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        settings.setdict(cls.download_path_only, priority="cmdline")

    async def start(self) -> Any:
        try:
            fetcher = RobotsFetcher(self.crawler, self.config)
            self.results.append(await fetcher.fetch(self.authority))
        except Exception as exc:
            self.results.append(exc)
        return
        yield


class Command(ScrapyCommand):
    requires_project = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "URL [--user-agent TOKEN] [--file PATH | --cached | --live] [--show-rules]"

    def short_desc(self) -> str:
        return "Explain whether robots.txt allows a URL, by which rule on which line"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--user-agent",
            metavar="TOKEN",
            help="the crawler's product token (by default ROBOTSTXT_USER_AGENT, else USER_AGENT's)",
        )
        parser.add_argument(
            "--file", metavar="PATH", help="read this robots.txt instead of fetching it"
        )
        parser.add_argument(
            "--cached",
            action="store_true",
            help="read the copy crawls keep across restarts, even an expired one; never fetch",
        )
        parser.add_argument(
            "--live",
            action="store_true",
            help="fetch robots.txt now, even when a crawl would use its kept copy",
        )
        parser.add_argument(
            "--show-rules", action="store_true", help="list the rules that apply to the crawler"
        )

    def run(self, args: list[str], opts: Any) -> None:
        if len(args) != 1:
            raise UsageError("scrapy robots takes one URL")
        # Rule text may hold undecodable bytes: print them escaped, whatever the terminal.
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        self.exitcode = self._explain(args[0], opts)

    def _explain(self, url: str, opts: Any) -> int:
        assert self.settings is not None
        try:
            config = RobotsSettings.from_settings(with_defaults(self.settings, ROBOTS_DEFAULTS))
        except SettingError as exc:
            return _error(str(exc))
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises on a bad port)
        except ValueError as exc:
            return _error(f"not a valid URL: {url!r} ({exc})")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return _error(f"not an http(s) URL: {url!r}")
        if opts.file and (opts.cached or opts.live):
            return _error("--file reads a file: give it without --cached or --live")
        if opts.cached and opts.live:
            return _error("--cached and --live exclude each other")
        authority = f"{parts.scheme}://{parts.netloc}"
        user_agent = self.settings.get("USER_AGENT") or ""
        token = product_token(opts.user_agent or config.user_agent or user_agent)
        if not token:
            return _error("no product token: give --user-agent TOKEN")
        found = self._robots_txt(authority, url, token, config, opts)
        if isinstance(found, int):
            return found
        entry, source, body = found
        verdict = entry.check(url, token)
        print(f"URL:          {url}")
        print(f"robots.txt:   {source}")
        print(f"crawler:      {token}")
        _print_file(entry.robots, body, token, opts.show_rules, url)
        if verdict.allowed:
            why = (
                f"by '{verdict.rule}' (line {verdict.line})"
                if verdict.rule
                else "(no rule matched)"
            )
            print(f"verdict:      ALLOWED {why}")
            return ALLOWED
        where = f" (line {verdict.line})" if verdict.line else ""
        print(f"verdict:      DISALLOWED by '{verdict.rule}'{where}")
        return DISALLOWED

    def _robots_txt(
        self, authority: str, url: str, token: str, config: RobotsSettings, opts: Any
    ) -> tuple[RobotsEntry, str, bytes] | int:
        """The robots.txt the options ask for: (entry, where it came from, body), or
        the exit status of an error already printed."""
        if opts.file:
            try:
                body = Path(opts.file).read_bytes()
            except OSError as exc:
                return _error(f"cannot read {opts.file}: {exc.strerror or exc}")
            robots = RobotsTxt.parse(body, lenient=config.lenient, max_bytes=config.max_bytes)
            return config.policy.success(robots, 0.0, None), opts.file, body
        if opts.cached:
            try:
                kept = self._cached(authority, config, fresh_only=False)
            except (StoreError, LookupError) as exc:
                return _error(str(exc))
            assert kept is not None
            return kept
        if not opts.live and self._has_kept_copies(config):
            with contextlib.suppress(StoreError, LookupError):  # then fetched, as a crawl would
                kept = self._cached(authority, config, fresh_only=True)
                if kept is not None:
                    return kept
        fetched = self._fetch(authority, config)
        if isinstance(fetched, BaseException):
            return _error(f"fetching robots.txt failed: {type(fetched).__name__}: {fetched}")
        entry = fetched.entry
        if len(fetched.hops) > 1:  # redirected: the way from the URL asked to the file
            print("redirects:")
            for hop_url, status in fetched.hops:
                print(f"  {hop_url} -> {status if status is not None else 'no answer'}")
        if fetched.error is not None:
            error = str(fetched.error) or type(fetched.error).__name__
            return _error(
                f"{fetched.url} unreachable ({error}); a crawl would have "
                f"{'allowed' if entry.check(url, token).allowed else 'disallowed'} {url}"
            )
        return entry, f"{fetched.url}, fetched now ({entry.describe()})", fetched.body or b""

    def _has_kept_copies(self, config: RobotsSettings) -> bool:
        """Whether crawls keep robots.txt across restarts where this one would look
        (a look never creates the SQLite file)."""
        assert self.settings is not None
        if _fleet_redis(self.settings):
            return config.persistent_path is not None
        return config.persistent_path is not None and Path(config.persistent_path).exists()

    def _cached(
        self, authority: str, config: RobotsSettings, fresh_only: bool
    ) -> tuple[RobotsEntry, str, bytes] | None:
        """The entry kept across restarts for *authority*, where it was read, its body;
        with *fresh_only*, ``None`` unless a crawl would use it without a request."""
        assert self.settings is not None
        fleet = _fleet_redis(self.settings)
        store: RedisRobotsStore | SQLiteRobotsStore
        if fleet:
            store, where = RedisRobotsStore(fleet, config.max_bytes), redacted_url(fleet)
        elif config.persistent_path is not None:
            store = SQLiteRobotsStore(config.persistent_path, config.max_bytes, time.time)
            where = str(store.path)
        else:
            raise LookupError("RFC9309_PERSISTENT_CACHE is off: nothing is kept")
        # On a thread of its own: the caller may run an event loop already.
        with ThreadPoolExecutor(1) as thread:
            record = thread.submit(asyncio.run, _read_kept(store, authority)).result()
        if record is None:
            raise LookupError(f"no copy of {authority}/robots.txt is kept in {where}")
        now = time.time()
        fresh = record.fresh(now, config.policy.cache_ttl)
        if fresh_only and not fresh:
            return None
        body = record.body or b""
        robots = parse_now(config, body) if record.outcome == "success" else None
        outcome = FetchOutcome(record.outcome)
        entry = entry_for(
            config, outcome, record.status, robots, record.reason, config.policy.cache_ttl
        )
        age = now - record.fetched_at
        state = (
            "fresh: a crawl uses it without a request" if fresh else "expired: a crawl refreshes it"
        )
        source = f"the copy kept in {where}, fetched {age:.0f} s ago ({state}; {entry.describe()})"
        return entry, source, body

    def _fetch(self, authority: str, config: RobotsSettings) -> Fetched | BaseException:
        assert self.crawler_process is not None
        results: list[Fetched | BaseException] = []
        self.crawler_process.crawl(
            _FetchSpider, authority=authority, config=config, results=results
        )
        self.crawler_process.start()
        if not results:
            return RuntimeError("the crawler did not start (run with --loglevel=INFO to see why)")
        return results[0]


def _fleet_redis(settings: BaseSettings) -> str | None:
    """The Redis where the project's crawls keep the fleet's robots.txt copies
    (``FLEET_REDIS_URL``, as the add-on sets it in a crawl of a scrapy-redis
    project: a command's settings do not go through add-ons); ``None``: no fleet."""
    if Addon in (load_object(path) for path in build_component_list(settings["ADDONS"])):
        settings = settings.copy()
        Addon().update_settings(settings)
    url = settings.get("FLEET_REDIS_URL")
    return None if url is None or fleet_off(url) else str(url)


async def _read_kept(
    store: RedisRobotsStore | SQLiteRobotsStore, authority: str
) -> StoredRobots | None:
    try:
        return await store.get(authority)
    finally:
        await store.close()


def _print_file(
    robots: RobotsTxt | None, body: bytes, token: str, show_rules: bool, url: str
) -> None:
    if robots is None:
        return
    lines = split_lines(decode(body))
    groups = ", ".join(
        _group_header(lines, group.line, len(group.agents)) for group in robots.select(token).groups
    )
    print(f"group:        {groups or 'none applies: everything allowed'}")
    crawl_delay, rate = robots.crawl_delay(token), robots.request_rate(token)
    print(f"crawl delay:  {f'{crawl_delay:g} s' if crawl_delay is not None else '-'}")
    print(f"request rate: {f'{rate[0]}/{rate[1]:g} s' if rate else '-'}")
    print(f"sitemaps:     {', '.join(robots.sitemaps) or '-'}")
    stated = robots.preferences(url, token)
    for line, text in stated.lines:
        print(f"preferences:  line {line}: {text}")
    if not stated.lines:
        print("preferences:  -")
    for line, record in robots.ignored:
        print(f"ignored:      line {line}: {record} (not a usable value)")
    if show_rules:
        print("rules:")
        for rule in robots.rules(token):
            print(f"  line {rule.line:>4}  {rule}")


def _group_header(lines: list[str], line: int, agents: int) -> str:
    """A group's first user-agent line as the file writes it, and how many more."""
    first = lines[line - 1].strip() if line <= len(lines) else "User-agent"
    more = f" + {agents - 1} more user-agent(s)" if agents > 1 else ""
    return f"{first}{more} (line {line})"


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return ERROR
