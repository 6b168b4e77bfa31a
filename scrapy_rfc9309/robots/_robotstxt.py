"""RobotsTxt: parse once, check many, verdicts carry evidence (RFC 9309 §2.2)."""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter

from . import _lexer as lexer
from ._builder import Builder, parse_lines
from ._collector import collector_paused
from ._model import ALLOWED, STAR, Group, GroupSelection, Rule, RuleColumns, Verdict, rule_of
from ._onepass import first_check
from ._pattern import KEPT_ESCAPE, PATH_CHARS, canonical
from ._preferences import NO_PREFERENCES, Preferences, applicable
from ._prefixtree import LEAF_SIZE, PIECE_INDEX_AT, RuleSet, need_pieces
from ._useragent import product_token

_AUTHORITY = re.compile(r"[^/?#]*")
#: An absolute URL (or a path) whose path + query is already canonical, with no
#: fragment: the common case, split off in one step.  Its path is ``None`` for a URL
#: with none (``https://example.com``, most crawls' first URL of a site): ``/``.
#: Escapes and the runs of characters between them, unrolled: linear on any URL, and
#: no slower on a URL without an escape than the characters' class alone.  The
#: corpus's URLs with escapes take 0.77 us instead of 3.4 the long way.
_CANONICAL_URL = re.compile(
    rf"(?:[^:/?#]+://[^/?#]*)?(/(?!/)[{PATH_CHARS}]*(?:{KEPT_ESCAPE}[{PATH_CHARS}]*)*)?"
)


def path_of(url: str) -> str:
    """The canonical path + query of an absolute URL or of a path.

    The fragment is dropped; an empty path is ``/``.
    """
    simple = _CANONICAL_URL.fullmatch(url)
    return (simple.group(1) or "/") if simple is not None else _uncommon_path_of(url)


def _uncommon_path_of(url: str) -> str:
    """:func:`path_of` for a URL whose path is not canonical already (a character to
    encode, an escape to change), that has a fragment, or a query but no path."""
    rest = url
    if not url.startswith("/") or url.startswith("//"):
        scheme_end = url.find("://")
        if scheme_end >= 0 or url.startswith("//"):
            authority_end = _AUTHORITY.match(url, scheme_end + 3 if scheme_end >= 0 else 2)
            rest = url[authority_end.end() :]  # type: ignore[union-attr]
    rest = rest.partition("#")[0]
    return canonical(rest if rest.startswith("/") else "/" + rest)


class RobotsTxt:
    """A parsed robots.txt file.

    >>> robots = RobotsTxt.parse(b"User-agent: *\\nDisallow: /private\\n")
    >>> robots.check("https://example.com/private/x", "MyBot/1.0")
    Verdict(allowed=False, rule='Disallow: /private', line=2)

    Parsing is cheap; the patterns of a group are compiled the first time a
    crawler that group applies to is checked, and kept.
    """

    # Slots, and one estimate kept, not a dictionary of each: a broad crawl keeps
    # thousands of files, most of them a few lines (a one-rule file checked twice
    # and estimated held 2,115 bytes with the dictionaries, 1,938 without).
    __slots__ = (
        "_by_token",
        "_checked_once",
        "_memory_estimate",
        "_rulesets",
        "groups",
        "ignored",
        "lenient_lines",
        "sitemaps",
        "truncated",
    )

    def __init__(
        self,
        groups: list[Group],
        sitemaps: list[str],
        *,
        truncated: bool = False,
        lenient_lines: int = 0,
        ignored: Sequence[tuple[int, str]] = (),
    ) -> None:
        self.groups = groups
        self.sitemaps = sitemaps
        #: True when content beyond the size limit was ignored (§2.5).
        self.truncated = truncated
        #: How many lines were only understood thanks to lenient parsing.
        self.lenient_lines = lenient_lines
        #: ``(line, record)`` of the first Crawl-delay / Request-rate /
        #: Content-Usage / Content-Signal records whose value was unusable, or that
        #: stood outside any group, and were ignored (at most :data:`MAX_IGNORED`).
        self.ignored = ignored
        # The groups of each product token; none for a file of one group (most
        # files), whose agents decide: a dictionary and a list less (190 bytes a
        # host of a 1,500-host crawl whose files name one agent, tracemalloc).
        self._by_token: dict[str, list[Group]] | None = None
        if len(groups) != 1:
            by_token = self._by_token = {}
            for group in groups:
                for agent in group.agents:
                    members = by_token.setdefault(agent, [])
                    if not members or members[-1] is not group:
                        members.append(group)
        self._rulesets: dict[str, RuleSet] = {}
        # Tokens checked once, not yet compiled.  A tuple of strings, which the garbage
        # collector does not track (a set it does): a broad crawl keeps thousands of
        # files, and each of its full collections walks what they hold.
        self._checked_once: tuple[str, ...] = ()
        # The latest estimate and its crawler: a cache asks for one crawler's.
        self._memory_estimate: tuple[str, int] | None = None

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
        truncated = False
        if isinstance(body, str) and (
            len(body) * 4 <= max_bytes or (len(body) <= max_bytes and body.isascii())
        ):
            # At most 4 octets a character, 1 for ASCII: a text this short is never
            # cut (and not copied as octets: 1 MiB of the 500 KiB file's peak).
            text = lexer.decode(body)
        else:
            raw = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
            raw, truncated = lexer.truncate(raw, max_bytes)
            text = lexer.decode(raw)
            del raw  # not alive beside the rules
        built = Builder()
        first = 1
        with collector_paused(text.count("\n")):
            for lines in lexer.line_chunks(text):
                parse_lines(lines, lenient, built, first)
                first += len(lines)
        return cls.of(built, truncated=truncated)

    @classmethod
    def of(cls, built: Builder, *, truncated: bool = False) -> RobotsTxt:
        """The file whose lines *built* holds (see :func:`._builder.parse_lines`)."""
        return cls(
            built.groups,
            list(built.sitemaps),
            truncated=truncated,
            lenient_lines=built.lenient_lines,
            ignored=tuple(built.ignored),  # most files: the one empty tuple
        )

    def memory_estimate(self, user_agent: str) -> int:
        """An estimate of the bytes this object holds once *user_agent* has checked
        URLs under every one of its rules (its rules compiled, their index built
        whole), for bounding caches by memory.

        Fitted with ``tracemalloc`` on the 295 real files of the tests' corpus and
        on hostile files of 2,000 to 30,000 rules (see the tests): within 25% of
        what they hold but for a few real files whose rules share long prefixes
        (their index has a node a character).  A crawl that checks a few URLs of a
        site holds less: the index is built where its paths lead.
        """
        cached = self._memory_estimate
        if cached is not None and cached[0] == user_agent:
            return cached[1]
        estimate = _BASE_BYTES + _SITEMAP_BYTES * len(self.sitemaps)
        agent_bytes = _AGENT_BYTES
        if self._by_token is None:  # one group: no table of tokens, an agent a name
            estimate -= _TABLE_BYTES
            agent_bytes = _NAME_BYTES
        estimate += sum(map(len, self.sitemaps))
        for group in self.groups:
            estimate += _GROUP_BYTES + agent_bytes * len(group.agents)
            estimate += _RULE_BYTES * (len(group.patterns) + len(group.preferences))
            estimate += sum(map(len, group.patterns))
        compiled, _ = self._rules_for(product_token(user_agent))
        estimate += _COMPILED_CHAR_BYTES * sum(map(len, compiled))
        if 0 < len(compiled) <= LEAF_SIZE:  # one leaf, no index (see RuleSet)
            estimate += _FEW_RULE_SET_BYTES + _FEW_COMPILED_BYTES * len(compiled)
        elif compiled:
            estimate += _RULE_SET_BYTES + _COMPILED_BYTES * len(compiled)
            starts = map(itemgetter(0), map(str.partition, compiled, repeat("*")))
            estimate += _HEAD_CHAR_BYTES * sum(map(len, starts))
            wildcards = sum(map(str.__contains__, compiled, repeat("*")))
            in_pieces = sum(need_pieces(compiled))
            if in_pieces > PIECE_INDEX_AT:
                wildcards -= in_pieces
                estimate += _PIECE_INDEXED_BYTES * in_pieces
            estimate += _WILDCARD_BYTES * wildcards
        self._memory_estimate = user_agent, estimate
        return estimate

    # -- group selection -------------------------------------------------

    def select(self, user_agent: str) -> GroupSelection:
        """The groups that apply to *user_agent* (a product token or a full User-Agent).

        All groups naming the crawler, merged; if none does, all ``*`` groups,
        merged; otherwise none (§2.2.1).
        """
        token = product_token(user_agent)
        return GroupSelection(token, tuple(self._groups_for(token)))

    def _groups_for(self, token: str) -> list[Group]:
        by_token = self._by_token
        if by_token is None:  # one group: it applies if it names the token, or *
            agents = self.groups[0].agents
            return self.groups if (token and token in agents) or STAR in agents else []
        return (by_token.get(token) if token else None) or by_token.get(STAR, [])

    def _applying(self, user_agent: str) -> list[Group]:
        """The groups :meth:`select` would give, without making a selection (read at
        every request: a selection cached per file was 3 more objects for the
        garbage collector to walk)."""
        return self._groups_for(product_token(user_agent))

    def rules(self, user_agent: str) -> list[Rule]:
        """The rules that apply to *user_agent*, in file order."""
        return list(map(rule_of, *self._rules_for(product_token(user_agent))))

    def _rules_for(self, token: str) -> RuleColumns:
        """The patterns and rule keys of the groups that apply to *token*: the group's
        own lists when one does (most files), not copies."""
        groups = self._groups_for(token)
        if len(groups) == 1:
            return groups[0].patterns, groups[0].rule_keys
        patterns: list[str] = []
        keys = array("Q")
        for group in groups:
            patterns += group.patterns
            keys += group.rule_keys
        return patterns, keys

    # -- checks ----------------------------------------------------------

    def check(self, url: str, user_agent: str) -> Verdict:
        """Decide whether *user_agent* may fetch *url* (an absolute URL or a path).

        The first check for a crawler tries its rules one by one; the second
        compiles them into a :class:`RuleSet`, kept for every later check.  A broad
        crawl checks one or a few URLs of most sites, and compiling costs several
        times what one pass over the rules does.  A crawler with thousands of rules
        has them compiled at its first check, so that no later check pays for it.
        """
        ruleset = self._rulesets.get(user_agent)
        if ruleset is _NO_RULES:
            return ALLOWED  # the URL is not even read: 0.15 us a check, not 0.9
        # path_of(url) without a call: 35 ns of a 1.3 us check (best of 10 interleaved
        # runs on a corpus file).
        simple = _CANONICAL_URL.fullmatch(url)
        path = (simple.group(1) or "/") if simple is not None else _uncommon_path_of(url)
        if ruleset is None:
            # Compiled once per product token: rotating User-Agent strings with one
            # token share it, and the by-string shortcut stays small.  Interned: a
            # broad crawl's thousands of files hold one copy of it (110 bytes a file less).
            token = sys.intern(product_token(user_agent))
            ruleset = self._rulesets.get(token)
            if ruleset is None:
                rules = self._rules_for(token)
                patterns = rules[0]
                if patterns and token not in self._checked_once and len(patterns) <= _ONE_PASS_AT:
                    self._checked_once += (token,)
                    return _unless_robots_txt(first_check(rules, path), path)
                ruleset = self._rulesets[token] = _compiled(rules)
            if len(self._rulesets) < _MAX_SHORTCUTS:
                self._rulesets[user_agent] = ruleset
        verdict = ruleset.decide(path)
        # Only a disallowed path is looked at again: 3% of a check (median of the
        # corpus's files) where every path was tested for /robots.txt first.
        return verdict if verdict.allowed else _unless_robots_txt(verdict, path)

    def prepare(self, user_agent: str) -> None:
        """Compile the rules that apply to *user_agent* now, as its second check
        would (for a caller that parses big files away from its event loop, so
        that no check there pays for compiling)."""
        token = sys.intern(product_token(user_agent))
        if token not in self._rulesets:
            self._rulesets[token] = _compiled(self._rules_for(token))

    def allowed(self, url: str, user_agent: str) -> bool:
        """Shortcut for ``check(url, user_agent).allowed``."""
        return self.check(url, user_agent).allowed

    def crawl_delay(self, user_agent: str) -> float | None:
        """The ``Crawl-delay`` of the groups that apply, in seconds (the largest if several)."""
        delays = [d for group in self._applying(user_agent) for d in group.crawl_delays]
        return max(delays) if delays else None

    def request_rate(self, user_agent: str) -> tuple[int, float] | None:
        """The ``Request-rate`` of the groups that apply as ``(requests, seconds)``
        (the slowest if several)."""
        rates = [r for group in self._applying(user_agent) for r in group.request_rates]
        return max(rates, key=lambda rate: rate[1] / rate[0]) if rates else None

    def preferences(self, url: str, user_agent: str) -> Preferences:
        """What the file says about the use of *url*'s content by *user_agent*:
        the ``Content-Usage`` and ``Content-Signal`` lines of the groups that apply,
        the longest matching path deciding.  None where the crawler may not go."""
        members = [member for group in self._applying(user_agent) for member in group.preferences]
        if not members or not self.check(url, user_agent).allowed:
            return NO_PREFERENCES
        return applicable(members, path_of(url))

    def delay(self, user_agent: str) -> float | None:
        """The least time between requests the file asks of *user_agent*:
        ``max(Crawl-delay, seconds / requests of Request-rate)``, or ``None``."""
        crawl_delay = self.crawl_delay(user_agent)
        rate = self.request_rate(user_agent)
        candidates = [d for d in (crawl_delay, rate and rate[1] / rate[0]) if d is not None]
        return max(candidates) if candidates else None


#: The parts of :meth:`RobotsTxt.memory_estimate`, in bytes, fitted by least
#: relative squares to what ``tracemalloc`` saw: the object itself, a sitemap (and
#: a byte a character), a group, one of its user-agents, a rule or preference line
#: as parsed (and a byte a character), the crawler's rule set, each of its rules
#: compiled and indexed, each character of those, each character of their literal
#: starts (the index's nodes) and each of them with a wildcard, or in the piece
#: index instead (chosen by hand); a rule set of at most ``LEAF_SIZE`` rules, and
#: each of its rules.  The rule set's parts were then moved by hand to leave the
#: fewest real files outside a quarter: 2 of 295 on Python 3.11 (3 on 3.13, whose
#: objects are smaller), the hostile files of the tests within 0.96-1.14 (1.02-1.21
#: on 3.13).
_BASE_BYTES = 1_250
_SITEMAP_BYTES = 64
_GROUP_BYTES = 314
_AGENT_BYTES = 184
#: What a file of one group holds less: its table of tokens, and an agent's entry.
_TABLE_BYTES = 100
_NAME_BYTES = 60
_RULE_BYTES = 69
_RULE_SET_BYTES = 922
_COMPILED_BYTES = 355
_COMPILED_CHAR_BYTES = 2
_HEAD_CHAR_BYTES = 1
_WILDCARD_BYTES = 69
_PIECE_INDEXED_BYTES = 10
_FEW_RULE_SET_BYTES = 651
_FEW_COMPILED_BYTES = 316

#: A crawler with more rules than this has them compiled at its first check: a
#: second check would pay for the compiling then, more than any later check may cost.
_ONE_PASS_AT = 2_000

#: The rule set of a crawler no rule applies to.
_NO_RULES = RuleSet(([], array("Q")))


def _unless_robots_txt(verdict: Verdict, path: str) -> Verdict:
    """*verdict*, but allowed for /robots.txt, always allowed (§2.2.2)."""
    if path.startswith("/robots.txt") and path[11:12] in ("", "?"):
        return ALLOWED
    return verdict


def _compiled(rules: RuleColumns) -> RuleSet:
    return RuleSet(rules) if rules[0] else _NO_RULES


#: How many User-Agent strings (besides tokens) a file remembers the rule set of.
_MAX_SHORTCUTS = 16
