"""From a file's lines to its model: records lexed line by line, groups built (§2.1)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TypeVar

from . import _lexer as lexer
from ._model import DISALLOW_BIT, STAR, Group
from ._preferences import LABEL, preference_line
from ._useragent import product_token

_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
# At most 9 digits of requests: a larger count is no real rate, and int() of a
# hostile 5,000-digit number would raise (Python's int string limit).
_RATE = re.compile(r"(\d{1,9})\s*/\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)(?![A-Za-z])", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def parse_crawl_delay(value: str) -> float | None:
    """Seconds from a ``Crawl-delay`` value; ``None`` if invalid, negative or not finite."""
    if _NUMBER.fullmatch(value) is None:
        return None
    delay = float(value)
    return delay if math.isfinite(delay) else None


def parse_request_rate(value: str) -> tuple[int, float] | None:
    """``(requests, seconds)`` from a ``Request-rate`` value like ``1/5``, ``3/1m``, ``1/10s``.

    Anything after the rate (e.g. a visit-time window) is ignored.
    """
    match = _RATE.match(value)
    if match is None:
        return None
    requests = int(match.group(1))
    seconds = float(match.group(2)) * _UNIT_SECONDS[match.group(3).lower()]
    if requests <= 0 or seconds <= 0 or not math.isfinite(seconds):
        return None
    return requests, seconds


class Builder:
    """Groups, sitemaps and ignored values from the records of a file, in file order."""

    __slots__ = ("agents", "current", "groups", "ignored", "in_rules", "lenient_lines", "sitemaps")

    def __init__(self) -> None:
        self.groups: list[Group] = []
        self.sitemaps: dict[str, None] = {}  # an ordered set
        self.ignored: list[tuple[int, str]] = []
        self.current: Group | None = None
        self.agents: set[str] = set()  # the current group's
        #: An Allow/Disallow line was seen: a user-agent line starts a group (§2.1).
        self.in_rules = False
        #: How many lines were only understood thanks to lenient parsing.
        self.lenient_lines = 0

    def start_group(self, line: int) -> Group:
        """Start a group at a user-agent line that follows rules or no group (§2.1)."""
        self.current, self.agents, self.in_rules = Group([], line), set(), False
        self.groups.append(self.current)
        return self.current

    def other(self, directive: str, line: int, value: str) -> None:
        """A record that is neither a rule nor a user-agent line."""
        if directive == lexer.SITEMAP:
            if value:
                self.sitemaps[value] = None
        elif directive in (lexer.CONTENT_USAGE, lexer.CONTENT_SIGNAL):
            member = preference_line(directive, value, line) if self.current else None
            if member is not None and self.current is not None:
                self.current.preferences = _appended(self.current.preferences, member)
            elif len(self.ignored) < MAX_IGNORED:
                where = "" if self.current else " (before any User-agent line)"
                self.ignored.append((line, f"{LABEL[directive]}: {_shorten(value)}{where}"))
        elif self.current is None:
            return
        elif directive == lexer.CRAWL_DELAY:
            delay = parse_crawl_delay(value)
            if delay is not None:
                self.current.crawl_delays = _appended(self.current.crawl_delays, delay)
            elif len(self.ignored) < MAX_IGNORED:
                self.ignored.append((line, f"Crawl-delay: {_shorten(value)}"))
        elif directive == lexer.REQUEST_RATE:
            rate = parse_request_rate(value)
            if rate is not None:
                self.current.request_rates = _appended(self.current.request_rates, rate)
            elif len(self.ignored) < MAX_IGNORED:
                self.ignored.append((line, f"Request-rate: {_shorten(value)}"))


#: The usual spellings of the standard keys ("Disallow", "User-Agent"), found without
#: stripping and lower-casing the key.
_AS_WRITTEN = {
    spelling: directive
    for key, directive in lexer.STANDARD_KEYS.items()
    for spelling in (key, key.capitalize(), key.title(), key.upper())
}


#: The usual spellings of the rule keys, each with whether it allows.
_RULES_AS_WRITTEN = {
    spelling: directive == lexer.ALLOW
    for spelling, directive in _AS_WRITTEN.items()
    if directive in (lexer.DISALLOW, lexer.ALLOW)
}


def parse_lines(lines: list[str], lenient: bool, builder: Builder, first: int = 1) -> None:
    """Add to *builder* the groups, sitemaps and ignored records of *lines* (the
    first numbered *first*), lexed here line by line, rules added inline: a record
    object and a generator step per line were half of a parse's time
    (``bench_core.py``'s parse figures).  A property test holds it equal to the
    reference lexer of the tests (``tests/core/reference_lexer.py``)."""
    keys = lexer.LENIENT_KEYS if lenient else lexer.STANDARD_KEYS
    typos, ws, as_written = lexer.TYPO_KEYS, lexer.WHITESPACE, _AS_WRITTEN
    allow, rule_directives, user_agent = (
        lexer.ALLOW,
        (lexer.DISALLOW, lexer.ALLOW),
        lexer.USER_AGENT,
    )
    rule_spellings = _RULES_AS_WRITTEN
    # The builder's current group's rules, names and in_rules, kept here meanwhile.
    group = builder.current
    if group is not None:
        add_pattern, add_key = group.patterns.append, group.rule_keys.append
    in_rules = builder.in_rules
    for number, line in enumerate(lines, first):
        if "#" in line:  # 1.5% of real lines: a test, not a call (15% less time over the corpus)
            line = line[: line.find("#")]
        if not line:
            continue  # blank, or a comment alone
        key, colon, value = line.partition(":")
        # Most lines: a rule, its key as usually written (one lookup gives whether
        # it allows).
        allows = rule_spellings.get(key) if colon else None
        if allows is None:
            if not colon:
                if not lenient:
                    continue
                words = line.split()  # LENIENT: Google takes "Disallow /x" (two words)
                if len(words) != 2:
                    continue
                key, value = words
            directive = as_written.get(key)
            if directive is None:
                key = key.strip(ws).lower()
                directive = keys.get(key)
                if directive is None:
                    continue  # unknown records change nothing
                if not colon or key in typos:
                    builder.lenient_lines += 1
            elif not colon:
                builder.lenient_lines += 1
            if directive == user_agent:  # inline: some files have thousands
                if group is None or in_rules:
                    group, in_rules = builder.start_group(number), False
                    add_pattern, add_key = group.patterns.append, group.rule_keys.append
                value = value.strip(ws)
                if value.isalnum() and value.isascii():  # the usual case: "Googlebot"
                    agent = value.lower()
                else:
                    agent = STAR if _is_star(value) else product_token(value)
                if agent and agent not in builder.agents:
                    builder.agents.add(agent)
                    group.agents.append(agent)
                continue
            if directive not in rule_directives:
                builder.other(directive, number, value.strip(ws))
                continue
            allows = directive == allow
        if group is not None:  # else before any user-agent line: no rule
            in_rules = True
            value = value.strip(ws)
            if value:  # Group.add_rule(), inline: 0.85 ms less for 29,000 rules (timeit)
                add_pattern(value)
                add_key(number if allows else number + DISALLOW_BIT)
    builder.in_rules = in_rules


#: How many ignored records a :class:`RobotsTxt` remembers (for reports).
MAX_IGNORED = 20


_T = TypeVar("_T")


def _appended(values: Sequence[_T], value: _T) -> list[_T]:
    """*values* with *value* at the end: the list itself, or a new list in place of a
    group's shared empty tuple (see :class:`._model.Group`)."""
    listed = values if isinstance(values, list) else list(values)
    listed.append(value)
    return listed


def _shorten(value: str, limit: int = 40) -> str:
    return value if len(value) <= limit else f"{value[:limit]}... ({len(value)} characters)"


def _is_star(value: str) -> bool:
    # "*" alone; a "*" followed by whitespace and a comment-like tail is still the
    # star group (what Google and most parsers do with "User-agent: * ignored").
    return value == STAR or (value.startswith(STAR) and value[1:2].isspace())
