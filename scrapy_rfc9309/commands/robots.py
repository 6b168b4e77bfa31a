"""``scrapy robots URL``: may the crawler fetch URL, and which rule of which line decides.

Fetches ``{scheme}://{authority}/robots.txt`` (or reads ``--file``) with the
middleware's rules: redirects followed up to ``RFC9309_MAX_REDIRECTS``, at most
``RFC9309_MAX_BYTES`` read, 4xx = everything allowed, 429/5xx/network error =
``RFC9309_UNREACHABLE``.  Exit status: 0 allowed, 1 disallowed, 2 error.
"""

from __future__ import annotations

import argparse
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from ..robots import FetchOutcome, RobotsEntry, RobotsTxt, outcome_for_status, product_token
from ..settings import ROBOTS_DEFAULTS, RobotsSettings, SettingError, with_defaults

ALLOWED, DISALLOWED, ERROR = 0, 1, 2


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # hops are followed (and counted) by fetch()


def fetch(url: str, config: RobotsSettings, user_agent: str) -> tuple[RobotsEntry, str]:
    """The robots.txt entry the middleware would cache for *url*'s authority, and
    the robots.txt URL that was finally read."""
    opener = urllib.request.build_opener(_NoRedirects)
    policy, now = config.policy, time.monotonic()
    seen = {url}
    for _hop in range(config.max_redirects + 1):
        request = urllib.request.Request(url, headers={"User-Agent": user_agent})
        try:
            with opener.open(request, timeout=config.timeout) as response:
                status, body = response.status, response.read(config.max_bytes + 1)
        except urllib.error.HTTPError as exc:
            status, body = exc.code, b""
            location = exc.headers.get("Location")
            if outcome_for_status(status) is FetchOutcome.REDIRECT and location:
                url = urljoin(url, location)
                if url in seen:
                    break  # a loop: unavailable
                seen.add(url)
                continue
        except (OSError, ValueError):  # DNS, connection refused, timeout
            return policy.unreachable(now), url
        if outcome_for_status(status) is FetchOutcome.REDIRECT:
            break  # a redirect without Location
        robots = RobotsTxt.parse(body, lenient=config.lenient, max_bytes=config.max_bytes)
        return policy.for_status(status, now, robots), url
    return policy.unavailable(now), url


class Command(ScrapyCommand):
    requires_project = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "URL [--user-agent TOKEN] [--file PATH] [--show-rules]"

    def short_desc(self) -> str:
        return "Explain whether robots.txt allows a URL, by which rule on which line"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--user-agent",
            metavar="TOKEN",
            help="the crawler's product token (default: ROBOTSTXT_USER_AGENT, else USER_AGENT's)",
        )
        parser.add_argument(
            "--file", metavar="PATH", help="read this robots.txt instead of fetching it"
        )
        parser.add_argument(
            "--show-rules", action="store_true", help="list the rules that apply to the crawler"
        )

    def run(self, args: list[str], opts: Any) -> None:
        if len(args) != 1:
            raise UsageError("scrapy robots takes one URL")
        assert self.settings is not None
        self.exitcode = self._explain(args[0], opts)

    def _explain(self, url: str, opts: Any) -> int:
        assert self.settings is not None
        try:
            config = RobotsSettings.from_settings(with_defaults(self.settings, ROBOTS_DEFAULTS))
        except SettingError as exc:
            return _error(str(exc))
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return _error(f"not an http(s) URL: {url!r}")
        user_agent = self.settings.get("USER_AGENT") or ""
        token = product_token(opts.user_agent or config.user_agent or user_agent)
        if not token:
            return _error("no product token: give --user-agent TOKEN")
        if opts.file:
            try:
                body = Path(opts.file).read_bytes()
            except OSError as exc:
                return _error(f"cannot read {opts.file}: {exc.strerror or exc}")
            robots = RobotsTxt.parse(body, lenient=config.lenient, max_bytes=config.max_bytes)
            entry, source = config.policy.success(robots, 0.0, None), opts.file
        else:
            robots_url = f"{parts.scheme}://{parts.netloc}/robots.txt"
            entry, source = fetch(robots_url, config, user_agent)
            source = f"{source} ({entry.describe()})"
        verdict = entry.check(url, token)
        print(f"URL:          {url}")
        print(f"robots.txt:   {source}")
        print(f"crawler:      {token}")
        _print_file(entry.robots, token, opts.show_rules)
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


def _print_file(robots: RobotsTxt | None, token: str, show_rules: bool) -> None:
    if robots is None:
        return
    selection = robots.select(token)
    groups = ", ".join(
        f"User-agent: {' / '.join(group.agents)} (line {group.line})" for group in selection.groups
    )
    print(f"group:        {groups or 'none applies: everything allowed'}")
    crawl_delay, rate = robots.crawl_delay(token), robots.request_rate(token)
    print(f"crawl delay:  {f'{crawl_delay:g} s' if crawl_delay is not None else '-'}")
    print(f"request rate: {f'{rate[0]}/{rate[1]:g} s' if rate else '-'}")
    print(f"sitemaps:     {', '.join(robots.sitemaps) or '-'}")
    if show_rules:
        print("rules:")
        for rule in robots.rules(token):
            print(f"  line {rule.line:>4}  {rule}")


def _error(message: str) -> int:
    print(f"error: {message}")
    return ERROR
