"""``scrapy budget``: today's per-domain usage against its limits; ``--reset DOMAIN``."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from .._settings import SettingError
from ..budget.policy import PolicyError, day_of, domain_problem, zone
from ..budget.storage import SQLiteStorage, StorageError, first_kept_day
from ..downloadermiddlewares.budget._setup import (
    budget_settings,
    build_storage,
    describe_store,
    load_policy,
    storage_class,
    unix_time,
)


class Command(ScrapyCommand):
    requires_project = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[--day YYYY-MM-DD] [--reset DOMAIN]"

    def short_desc(self) -> str:
        return "Show the daily request/page budgets used per domain, or reset a domain"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--day", help="the day to show (today in DOMAINBUDGET_TIMEZONE by default)"
        )
        parser.add_argument(
            "--reset", metavar="DOMAIN", help="forget DOMAIN's counters for the day"
        )

    def run(self, args: list[str], opts: Any) -> None:
        if args:
            raise UsageError("scrapy budget takes no positional arguments")
        assert self.settings is not None
        if opts.day is not None:
            _check_day(opts.day)
        settings = budget_settings(self.settings)
        sqlite_path = Path(settings.get("DOMAINBUDGET_SQLITE_PATH")).absolute()
        try:
            store = describe_store(settings)
            policy = load_policy(settings)
            today = day_of(unix_time(), zone(settings.get("DOMAINBUDGET_TIMEZONE")))
            day = opts.day or today
            sqlite = issubclass(storage_class(settings), SQLiteStorage)
            if sqlite and not sqlite_path.exists():
                # A look must not create a store (outside a project: ./.scrapy/).
                print(f"No budget store at {sqlite_path}: nothing recorded.")
                return
            key = None if opts.reset is None else policy.limits_for(_host_of(opts.reset)).key
            storage = build_storage(settings)
            try:
                usage = storage.usage(day)
                if key is not None:
                    if key not in usage:
                        print(f"Nothing recorded for {key} on {day}: nothing to reset.")
                        return
                    storage.reset(key, day)
                    requests, pages = usage[key]
                    print(
                        f"Reset the budget of {key} for {day} "
                        f"(it had {requests} requests, {pages} pages)."
                    )
                    return
            finally:
                storage.close()
        except (PolicyError, StorageError, SettingError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        print(f"Daily budgets on {day}, from {store}")
        if not usage:
            oldest = first_kept_day(today)
            kept = f"; days before {oldest} are not kept" if day < oldest else ""
            print(f"  (nothing recorded{kept})")
        rows = []
        for key, (requests, pages) in usage.items():
            limits = policy.limits_for(key)
            rows.append(
                (
                    key,
                    _use(requests, limits.max_requests_per_day),
                    _use(pages, limits.max_pages_per_day),
                )
            )
        # Each column as wide as its widest cell: the columns line up.
        keys = max((len(key) for key, _, _ in rows), default=0)
        uses = max((len(use) for _, use, _ in rows), default=0)
        for key, requests_use, pages_use in rows:
            print(f"  {key:<{keys}}  requests {requests_use:<{uses}}  pages {pages_use}")


def _use(used: int, limit: int) -> str:
    """``12 / 200 (188 left)``, or ``12 / unlimited``."""
    if not limit:
        return f"{used:>6} / unlimited"
    return f"{used:>6} / {limit} ({max(limit - used, 0)} left)"


def _check_day(day: str) -> None:
    if _DAY.fullmatch(day) is None:
        raise UsageError(f"--day must be a date written YYYY-MM-DD, not {day!r}")
    try:
        date.fromisoformat(day)
    except ValueError:
        raise UsageError(f"--day {day}: no such date") from None


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _host_of(domain: str) -> str:
    """The host *domain* names, as the crawl counts it: a URL or ``host:port`` is
    cut to its host (a budget counts a domain whatever the scheme or port)."""
    text = domain.strip()
    try:
        host = urlsplit(text if "//" in text else "//" + text).hostname
    except ValueError:
        host = None
    problem = domain_problem(host) if host else f"not a domain name: {domain!r}"
    if problem is not None:
        raise PolicyError(f"--reset: {problem}")
    assert host is not None
    return host
