"""RobotsTxt: parse once, check many, verdicts carry evidence (RFC 9309 §2.2)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from . import lexer
from .lexer import Record
from .pattern import Pattern, canonical
from .useragent import product_token

#: The user-agent value of the groups that apply to every crawler.
STAR = "*"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to "may this crawler fetch this URL?".

    ``rule`` is the deciding rule as written (``"Disallow: /private"``) and
    ``line`` its 1-based line number; both are ``None`` when no rule matched
    (then the URL is allowed, §2.2.2).
    """

    allowed: bool
    rule: str | None = None
    line: int | None = None

    def __bool__(self) -> bool:
        return self.allowed


ALLOWED = Verdict(True)


@dataclass(frozen=True, slots=True)
class Rule:
    """An ``Allow`` or ``Disallow`` line of a group."""

    allow: bool
    pattern: str
    line: int

    def __str__(self) -> str:
        return f"{'Allow' if self.allow else 'Disallow'}: {self.pattern}"


@dataclass(slots=True)
class Group:
    """User-agent lines and the records that follow them (§2.1)."""

    agents: list[str]
    line: int
    rules: list[Rule] = field(default_factory=list)
    crawl_delays: list[float] = field(default_factory=list)
    request_rates: list[tuple[int, float]] = field(default_factory=list)
    #: True once an Allow/Disallow line was seen: the next user-agent line starts a new group.
    closed: bool = False


@dataclass(frozen=True, slots=True)
class GroupSelection:
    """The groups that apply to one product token, merged (§2.2.1)."""

    token: str
    groups: tuple[Group, ...]

    @property
    def is_star(self) -> bool:
        """True when no group names the crawler and the ``*`` groups apply."""
        return bool(self.groups) and all(STAR in group.agents for group in self.groups)


_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_RATE = re.compile(r"(\d+)\s*/\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)(?![A-Za-z])", re.IGNORECASE)
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


class _CompiledRule:
    """A rule ready for matching: its pattern compiled, its verdict precomputed."""

    __slots__ = ("kind", "literal", "matches", "verdict", "sort_key", "bucket")

    def __init__(self, rule: Rule) -> None:
        pattern = Pattern(rule.pattern)
        self.kind = pattern.kind
        self.literal = pattern.first_literal
        self.matches = pattern.matches
        self.verdict = Verdict(rule.allow, str(rule), rule.line)
        # Longest pattern first; on equal length Allow first (§2.2.2).  The first
        # rule that matches in this order is the decider.
        self.sort_key = (-pattern.length, not rule.allow, rule.line)
        # Rules whose literal start fixes the path's second character can only
        # match paths with that character there; index them by it.
        self.bucket = self.literal[1] if len(self.literal) >= 2 else None


class RuleSet:
    """The merged rules of the groups that apply to one crawler."""

    __slots__ = ("_buckets", "_unbucketed", "rule_count")

    def __init__(self, rules: Iterable[Rule]) -> None:
        compiled = sorted((_CompiledRule(rule) for rule in rules), key=lambda r: r.sort_key)
        self.rule_count = len(compiled)
        unbucketed = [rule for rule in compiled if rule.bucket is None]
        keys = {rule.bucket for rule in compiled if rule.bucket is not None}
        self._unbucketed = tuple(_plan(unbucketed))
        self._buckets = {
            key: tuple(_plan(r for r in compiled if r.bucket in (key, None))) for key in keys
        }

    def decide(self, path: str) -> Verdict:
        """The verdict for a canonical path + query."""
        candidates = self._buckets.get(path[1:2], self._unbucketed)
        for kind, literal, matches, verdict in candidates:
            if kind == Pattern.PREFIX:
                if path.startswith(literal):
                    return verdict
            elif kind == Pattern.EXACT:
                if path == literal:
                    return verdict
            elif matches(path):
                return verdict
        return ALLOWED


def _plan(rules: Iterable[_CompiledRule]) -> Iterable[tuple[int, str, object, Verdict]]:
    # Plain tuples: the check loop unpacks them faster than it reads attributes.
    return ((r.kind, r.literal, r.matches, r.verdict) for r in rules)


_PATH_START = re.compile(r"[/?#]")


def path_of(url: str) -> str:
    """The canonical path + query of an absolute URL or of a path.

    The fragment is dropped; an empty path is ``/``.
    """
    rest = url
    if not url.startswith("/") or url.startswith("//"):
        scheme_end = url.find("://")
        if scheme_end >= 0 or url.startswith("//"):
            authority_start = scheme_end + 3 if scheme_end >= 0 else 2
            found = _PATH_START.search(url, authority_start)
            rest = url[found.start() :] if found else ""
    hash_at = rest.find("#")
    if hash_at >= 0:
        rest = rest[:hash_at]
    if not rest.startswith("/"):
        rest = "/" + rest
    return canonical(rest)


class RobotsTxt:
    """A parsed robots.txt file.

    >>> robots = RobotsTxt.parse(b"User-agent: *\\nDisallow: /private\\n")
    >>> robots.check("https://example.com/private/x", "MyBot/1.0")
    Verdict(allowed=False, rule='Disallow: /private', line=2)

    Parsing is cheap; the patterns of a group are compiled the first time a
    crawler that group applies to is checked, and kept.
    """

    def __init__(
        self,
        groups: list[Group],
        sitemaps: list[str],
        *,
        truncated: bool = False,
        lenient_lines: int = 0,
    ) -> None:
        self.groups = groups
        self.sitemaps = sitemaps
        #: True when content beyond the size limit was ignored (§2.5).
        self.truncated = truncated
        #: How many lines were only understood thanks to lenient parsing.
        self.lenient_lines = lenient_lines
        self._by_token: dict[str, list[Group]] = {}
        for group in groups:
            for agent in group.agents:
                members = self._by_token.setdefault(agent, [])
                if not members or members[-1] is not group:
                    members.append(group)
        self._selections: dict[str, GroupSelection] = {}
        self._rulesets: dict[str, RuleSet] = {}

    @classmethod
    def parse(
        cls,
        body: bytes | str,
        *,
        lenient: bool = True,
        max_bytes: int = lexer.DEFAULT_MAX_BYTES,
    ) -> RobotsTxt:
        """Parse a robots.txt body.  Never raises on malformed content (§2.3.1: parse
        line by line and use what can be parsed).

        *lenient* (default) also accepts what Google's parser accepts: common typos
        of directive names and a missing colon.  Only the first *max_bytes* octets
        are read, cut at a line end.
        """
        raw = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
        raw, truncated = lexer.truncate(raw, max_bytes)
        return cls.from_records(lexer.records(raw, lenient=lenient), truncated=truncated)

    @classmethod
    def from_records(cls, records: Iterable[Record], *, truncated: bool = False) -> RobotsTxt:
        """Build the model from a record stream (see :func:`.lexer.records`)."""
        groups: list[Group] = []
        sitemaps: list[str] = []
        current: Group | None = None
        lenient_lines = 0
        for record in records:
            lenient_lines += record.lenient
            directive, value = record.directive, record.value
            if directive == lexer.USER_AGENT:
                if current is None or current.closed:
                    current = Group([], record.line)
                    groups.append(current)
                agent = STAR if _is_star(value) else product_token(value)
                if agent and agent not in current.agents:
                    current.agents.append(agent)
            elif directive == lexer.SITEMAP:
                if value and value not in sitemaps:
                    sitemaps.append(value)
            elif current is None:
                continue  # records before the first user-agent line belong to no group (§2.2.2)
            elif directive in (lexer.ALLOW, lexer.DISALLOW):
                current.closed = True
                if value:  # an empty pattern is no rule
                    current.rules.append(Rule(directive == lexer.ALLOW, value, record.line))
            elif directive == lexer.CRAWL_DELAY:
                delay = parse_crawl_delay(value)
                if delay is not None:
                    current.crawl_delays.append(delay)
            elif directive == lexer.REQUEST_RATE:
                rate = parse_request_rate(value)
                if rate is not None:
                    current.request_rates.append(rate)
        return cls(groups, sitemaps, truncated=truncated, lenient_lines=lenient_lines)

    # -- group selection -------------------------------------------------

    def select(self, user_agent: str) -> GroupSelection:
        """The groups that apply to *user_agent* (a product token or a full User-Agent).

        All groups naming the crawler, merged; if none does, all ``*`` groups,
        merged; otherwise none (§2.2.1).
        """
        selection = self._selections.get(user_agent)
        if selection is None:
            token = product_token(user_agent)
            groups = (self._by_token.get(token) if token else None) or self._by_token.get(STAR, [])
            selection = GroupSelection(token, tuple(groups))
            self._selections[user_agent] = selection
        return selection

    def rules(self, user_agent: str) -> list[Rule]:
        """The rules that apply to *user_agent*, in file order."""
        return [rule for group in self.select(user_agent).groups for rule in group.rules]

    # -- checks ----------------------------------------------------------

    def check(self, url: str, user_agent: str) -> Verdict:
        """Decide whether *user_agent* may fetch *url* (an absolute URL or a path)."""
        ruleset = self._rulesets.get(user_agent)
        if ruleset is None:
            ruleset = self._rulesets[user_agent] = RuleSet(self.rules(user_agent))
        path = path_of(url)
        if path.startswith("/robots.txt") and path[11:12] in ("", "?"):
            return ALLOWED  # /robots.txt is always allowed (§2.2.2)
        return ruleset.decide(path)

    def allowed(self, url: str, user_agent: str) -> bool:
        """Shortcut for ``check(url, user_agent).allowed``."""
        return self.check(url, user_agent).allowed

    def crawl_delay(self, user_agent: str) -> float | None:
        """The ``Crawl-delay`` of the groups that apply, in seconds (the largest if several)."""
        delays = [d for group in self.select(user_agent).groups for d in group.crawl_delays]
        return max(delays) if delays else None

    def request_rate(self, user_agent: str) -> tuple[int, float] | None:
        """The ``Request-rate`` of the groups that apply as ``(requests, seconds)``
        (the slowest if several)."""
        rates = [r for group in self.select(user_agent).groups for r in group.request_rates]
        return max(rates, key=lambda rate: rate[1] / rate[0]) if rates else None

    def delay(self, user_agent: str) -> float | None:
        """The least time between requests the file asks of *user_agent*:
        ``max(Crawl-delay, seconds / requests of Request-rate)``, or ``None``."""
        crawl_delay = self.crawl_delay(user_agent)
        rate = self.request_rate(user_agent)
        candidates = [d for d in (crawl_delay, rate and rate[1] / rate[0]) if d is not None]
        return max(candidates) if candidates else None


def _is_star(value: str) -> bool:
    # "*" alone; a "*" followed by whitespace and a comment-like tail is still the
    # star group (what Google and most parsers do with "User-agent: * ignored").
    return value == STAR or (value.startswith(STAR) and value[1:2].isspace())
