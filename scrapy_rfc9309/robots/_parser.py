"""RobotsTxt: parse once, check many, verdicts carry evidence (RFC 9309 §2.2)."""

from __future__ import annotations

import functools
import gc
import math
import re
import threading
from bisect import bisect_left
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import itemgetter, not_
from typing import Any, NamedTuple

from . import _lexer as lexer
from ._pattern import (
    CONTAINS,
    EXACT,
    LITERAL_CHARS,
    PREFIX,
    SUFFIX,
    WILDCARD,
    canonical,
    compile_pattern,
    compile_text,
    heads,
    is_canonical,
    literal_lengths,
    pattern_texts,
    wildcard_matches,
)
from ._pieces import PieceIndex
from ._preferences import (
    LABEL,
    NO_PREFERENCES,
    PreferenceLine,
    Preferences,
    applicable,
    preference_line,
)
from ._useragent import group_name, product_token

#: The user-agent value of the groups that apply to every crawler.
STAR = "*"


class Verdict(NamedTuple):
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
# NamedTuple's generated __new__ is Python code; building from a tuple takes 0.14
# instead of 0.22 us (measured), and verdicts and rules are made per rule of a file.
_new_verdict = functools.partial(tuple.__new__, Verdict)


class Rule(NamedTuple):
    """An ``Allow`` or ``Disallow`` line of a group."""

    allow: bool
    pattern: str
    line: int

    def __str__(self) -> str:
        return f"{'Allow' if self.allow else 'Disallow'}: {self.pattern}"


_new_rule = functools.partial(tuple.__new__, Rule)


@dataclass(slots=True)
class Group:
    """User-agent lines and the records that follow them (§2.1)."""

    agents: list[str]
    line: int
    rules: list[Rule] = field(default_factory=list)
    crawl_delays: list[float] = field(default_factory=list)
    request_rates: list[tuple[int, float]] = field(default_factory=list)
    #: Its Content-Usage and Content-Signal lines (see :mod:`._preferences`).
    preferences: list[PreferenceLine] = field(default_factory=list)


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


# A rule ready for matching: (kind, literal, start or the Pattern itself for a
# WILDCARD, verdict), see ._pattern.
# A plain tuple: decide() unpacks thousands of them per check.
_Candidate = tuple[int, str, Any, Verdict]


def _decision_key(length: int, allow: bool, line: int) -> int:
    """The order in which rules decide (§2.2.2), smallest first: the longest pattern,
    ``Allow`` on a tie, then the earliest line.  One number (lines are below 2**32),
    shared by the first check and the compiled :class:`RuleSet`: sorting a
    25,000-rule file by it is 5 times faster than by a tuple (measured)."""
    return ((-length) << 33) + ((not allow) << 32) + line


#: The patterns of the rules tried so far: Disallow's, then Allow's.
_Written = tuple[set[str], set[str]]


def _first_copy(written: _Written, rule: Rule) -> bool:
    """True the first time *rule*'s pattern comes with its ``Allow``/``Disallow``
    (recorded in *written*): a line repeated never decides after its first copy, so
    the first check and :class:`RuleSet` both try it once."""
    seen = written[rule.allow]
    if rule.pattern in seen:
        return False
    seen.add(rule.pattern)
    return True


#: A decision key after every rule's.
_LAST = 1 << 62


#: A rule's decision key, pattern in text form, and the rule.
_Texted = tuple[int, str, Rule]
#: More rules that need literal pieces than this, and they go to a PieceIndex: its
#: lookups cost a check about 1 ms with a 2 KB URL, what trying this many costs.
_PIECE_INDEX_AT = 1_000

#: A trie node with at most this many candidate rules is not split further.
_LEAF_SIZE = 16
#: Deeper than this, nodes are not split (bounds recursion on pathological files).
_MAX_DEPTH = 200


#: Parsing more lines, or compiling more rules, than this pauses the garbage collector.
_PAUSE_COLLECTOR_AT = 2_000


class _CollectorPaused:
    """Python's cyclic garbage collector paused for a ``with`` block (see
    :func:`_collector_paused`)."""

    __slots__ = ()

    def __enter__(self) -> None:
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        gc.enable()


def _collector_paused(size: int) -> AbstractContextManager[None]:
    """A ``with`` block's context: the garbage collector paused, if it is enabled and
    *size* (lines to parse, rules to compile) is above :data:`_PAUSE_COLLECTOR_AT`.

    Parsing and compiling a file make several objects a rule, none in a reference
    cycle, and every 700 of them set off a collection that walks the young objects,
    now and then all of them: the parse and first check of 25,000 rules "/*<n>*ab"
    take 137 to 146 ms with it running, 83 to 94 paused (best of 8, two runs).  Only
    when the collector runs changes: it runs again as soon as the block ends.

    Never on another thread than the main one: the collector is the process's, and a
    worker thread parsing a big file (the robots middleware parses files of 16 KiB or
    more on one) would pause it for every other site's work on the event loop
    meanwhile.  (A program that disables it on another thread while a block runs on
    the main one finds it enabled again.)
    """
    if size <= _PAUSE_COLLECTOR_AT or not gc.isenabled():
        return nullcontext()
    if threading.current_thread() is not threading.main_thread():
        return nullcontext()
    return _CollectorPaused()


class _Node:
    """A node of the rule index, for the paths that start with the node's prefix.

    ``candidates`` are the rules such a path can match, in decision order: at an
    inner node the rules whose literal start ends at or above the node (a path
    whose next character has no child can match only those); at a leaf all the
    rules below it too.  ``children`` is keyed by the next path character, and is
    ``None`` at a leaf.  A node not split yet has ``candidates`` ``None`` and keeps
    in ``pending`` what splitting it needs (see :meth:`RuleSet._split`).
    """

    __slots__ = ("candidates", "children", "pending")

    def __init__(
        self,
        children: dict[str, _Node] | None,
        candidates: tuple[_Candidate, ...] | None,
        pending: _Pending | None = None,
    ):
        self.children = children
        self.candidates = candidates
        self.pending = pending


#: What splitting a node needs: the range of its rules going deeper, its depth, the
#: rules ended above it, and their candidates if already picked.
_Pending = tuple[int, int, int, list[int], "tuple[_Candidate, ...] | None"]


class RuleSet:
    """The merged rules of the groups that apply to one crawler, ready for matching.

    Rules are sorted longest pattern first, ``Allow`` before ``Disallow`` on equal
    length (§2.2.2): the first rule that matches in this order decides.

    Not every rule is tried: rules are indexed in a trie by the literal text they
    start with (``/about/x`` for ``/about/x*.pdf``), so a path is tried only against
    rules whose literal start is a prefix of it, plus the rules that start with a
    wildcard.
    """

    __slots__ = (
        "_candidates",
        "_keys_by_line",
        "_pieces",
        "_positions_by_start",
        "_root",
        "_rules",
        "_starts",
    )

    def __init__(self, rules: Iterable[Rule]) -> None:
        rules = list(rules)
        with _collector_paused(len(rules)):
            self._index(rules)

    def _index(self, rules: list[Rule]) -> None:
        # Built for a file's 30,000 rules too (at a crawler's first check): each step
        # is one pass, in C where it can be, that makes as few objects per rule as it
        # can; a rule is compiled only when a check first needs it.
        allows, raws, lines = zip(*rules, strict=True) if rules else ((), (), ())
        repeated = len(set(raws)) < len(raws)
        if repeated:
            written: _Written = (set(), set())  # 36,000 copies of a line: one is kept
            rules = [rule for rule in rules if _first_copy(written, rule)]
            allows, raws, lines = zip(*rules, strict=True)
        texts = pattern_texts(list(raws))
        # Two patterns the same once canonical ("/a%7e", "/a~"), or one as an Allow
        # and a Disallow: only the first in decision order can decide.
        may_repeat = repeated or texts != list(raws)
        keys = map(_decision_key, literal_lengths(texts), allows, lines)
        # Every path starts with "/": a pattern that starts otherwise ("a*") never matches.
        usable = map(str.startswith, texts, repeat(("/", "*")))
        ordered = sorted(compress(zip(keys, texts, rules, strict=True), usable))  # the keys differ
        texts = list(map(itemgetter(1), ordered))
        if may_repeat and len(set(texts)) < len(texts):
            ordered = _first_of_each_text(ordered)
            texts = list(map(itemgetter(1), ordered))
        # With many rules that need literal pieces found anywhere in the path (a "*"
        # with a literal piece after it), those go to a PieceIndex, and the prefix
        # tree keeps the others.
        ends = map(str.rstrip, map(str.rstrip, texts, repeat("$")), repeat("*"))
        in_pieces = list(map(str.__contains__, ends, repeat("*")))
        self._pieces: PieceIndex | None = None
        self._keys_by_line: dict[int, int] = {}  # the tree's rules' decision keys
        if sum(in_pieces) > _PIECE_INDEX_AT:
            self._pieces = PieceIndex(list(compress(ordered, in_pieces)))
            in_tree = list(map(not_, in_pieces))
            ordered = list(compress(ordered, in_tree))
            texts = list(compress(texts, in_tree))
            self._keys_by_line = {rule.line: key for key, _, rule in ordered}
        # The tree's rules in decision order; compiled into candidates when a node
        # that holds them is first reached (a crawl reaches few of a long file's nodes).
        self._rules = ordered
        self._candidates: dict[int, _Candidate] = {}
        # The tree's rules sorted by literal start: the rules below any node are then
        # a range of these, and its children's ranges are found by bisection.
        starts = sorted(zip(heads(texts), range(len(texts)), strict=True))
        below_root = bisect_left(starts, ("/\0",))  # after "" and "/": no literal start
        self._starts = list(map(itemgetter(0), starts))
        self._positions_by_start = list(map(itemgetter(1), starts))
        ended = self._cut(self._positions_by_start[:below_root])
        self._root = self._build(below_root, len(starts), 0, ended)

    def _build(
        self,
        low: int,
        high: int,
        depth: int,
        ended: list[int],
        ended_candidates: tuple[_Candidate, ...] | None = None,
    ) -> _Node:
        """A node at *depth* for the rules ``_starts[low:high]`` (literal start longer
        than the node's prefix) and *ended* (literal start a prefix of it, see
        :meth:`_cut`), by position in decision order.  A node with many rules is
        split into children only when a path first reaches it: a crawl checks a few
        paths of most sites, and a file's rules mostly sit under prefixes it never
        visits."""
        if high - low <= _LEAF_SIZE or depth >= _MAX_DEPTH:
            limit = ended[-1] if ended and self._is_prefix(ended[-1]) else len(self._rules)
            below = [p for p in self._positions_by_start[low:high] if p < limit]
            return _Node(None, self._pick(ended + below))
        return _Node(None, None, (low, high, depth, ended, ended_candidates))

    def _split(self, node: _Node) -> None:
        """Split *node*: one child per next character of its rules' literal starts,
        each found by bisection, so that splitting costs the same for 30 rules or
        30,000 (a root holding 36,000 prefix rules took 27 ms to split by a pass
        over them, measured)."""
        low, high, depth, ended, ended_candidates = node.pending  # type: ignore[misc]
        if ended_candidates is None:
            ended_candidates = self._pick(ended)
        starts, positions = self._starts, self._positions_by_start
        children = {}
        while low < high:
            start = starts[low]  # "/" and the node's prefix (depth characters), then more
            char = start[depth + 1]
            end = bisect_left(starts, start[: depth + 1] + chr(ord(char) + 1), low, high)
            # Literal starts that end with this character sort first among the range.
            going = low
            while going < end and len(starts[going]) == depth + 2:
                going += 1
            if going > low:
                ending = self._cut(ended + positions[low:going])
                children[char] = self._build(going, end, depth + 1, ending)
            else:  # the same ended rules: share the tuple
                children[char] = self._build(going, end, depth + 1, ended, ended_candidates)
            low = end
        node.children, node.candidates, node.pending = children, ended_candidates, None

    def _cut(self, ended: list[int]) -> list[int]:
        """Sort the positions of rules whose literal start is a prefix of a node's
        prefix, dropping those after the first plain prefix rule: every path that
        reaches the node matches that rule, so no rule after it can decide."""
        ordered = sorted(ended)
        for index, position in enumerate(ordered):
            if self._is_prefix(position):
                return ordered[: index + 1]
        return ordered

    def _is_prefix(self, position: int) -> bool:
        return self._candidate(position)[0] == PREFIX

    def _pick(self, positions: list[int]) -> tuple[_Candidate, ...]:
        return tuple(map(self._candidate, sorted(positions)))

    def _candidate(self, position: int) -> _Candidate:
        candidate = self._candidates.get(position)
        if candidate is None:
            _, text, rule = self._rules[position]
            pattern = compile_text(text)
            kind = pattern.kind
            verdict = _new_verdict((rule.allow, str(rule), rule.line))
            arg = pattern if kind == WILDCARD else pattern.start
            candidate = (kind, pattern.literal, arg, verdict)
            self._candidates[position] = candidate
        return candidate

    def decide(self, path: str) -> Verdict:
        """The verdict for a canonical path + query (it starts with ``/``)."""
        node = self._root
        at = 1
        while True:
            if node.candidates is None:
                self._split(node)
            children = node.children
            if children is None:
                break
            child = children.get(path[at : at + 1])
            if child is None:
                break
            node = child
            at += 1
        candidates: tuple[_Candidate, ...] = node.candidates  # type: ignore[assignment]
        heavy = self._pieces is not None or len(path) * len(candidates) > _HEAVY_WORK
        grams = _PathGrams(path) if heavy else None
        verdict = _first_candidate(candidates, path, grams)
        if self._pieces is None:
            return verdict
        assert grams is not None
        before = self._keys_by_line[verdict.line] if verdict.line else _LAST
        rule = self._pieces.first_match(path, grams.of_length, before)
        if rule is None:
            return verdict
        return _new_verdict((rule.allow, str(rule), rule.line))


def _first_of_each_text(ordered: list[_Texted]) -> list[_Texted]:
    """*ordered* (in decision order) without the rules whose pattern is the same once
    canonical as an earlier one's ("/a%7e" and "/a~", or an Allow's pattern written
    as a Disallow): the earlier one always matches first, and the later never decides."""
    seen: set[str] = set()
    kept = []
    for entry in ordered:
        text = entry[1]
        if text not in seen:
            seen.add(text)
            kept.append(entry)
    return kept


def _first_candidate(
    candidates: tuple[_Candidate, ...], path: str, grams: _PathGrams | None
) -> Verdict:
    """The verdict of the first of *candidates* (in decision order) that matches."""
    for kind, literal, arg, verdict in candidates:
        if kind == PREFIX:
            if path.startswith(literal):
                return verdict
        elif kind == CONTAINS:
            if (grams is None or grams.contains(literal)) and path.find(literal, arg) >= 0:
                return verdict
        elif kind == SUFFIX:
            if path.endswith(literal) and len(path) - len(literal) >= arg:
                return verdict
        elif kind == EXACT:
            if path == literal:
                return verdict
        elif (literal in path if grams is None else grams.contains(literal)) and wildcard_matches(
            path, arg
        ):
            return verdict
    return ALLOWED


def _first_check(rules: list[Rule], path: str) -> Verdict:
    """What :meth:`RuleSet.decide` answers for *path*, found by trying every rule:
    the first matching rule in :func:`_decision_key` order.

    Most rules are rejected on their literal pieces alone, without compiling them.
    """
    best: int | None = None
    deciding: Rule | None = None
    written: _Written = (set(), set())
    grams = _PathGrams(path) if len(path) * len(rules) > _HEAVY_WORK else None
    contains = path.__contains__ if grams is None else grams.contains
    second = path[1:2]
    previous: Rule | None = None
    for rule in rules:
        raw = rule.pattern
        char = raw[1:2]
        if char != second and char in LITERAL_CHARS and raw[:1] == "/":
            continue  # "/" and a literal that stay as they are: not how the path starts
        if previous is not None and raw == previous.pattern and rule.allow is previous.allow:
            continue  # the line before, repeated (36,000 copies of a rule: 7 ms, not 44)
        previous = rule
        rank: int | None
        if is_canonical(raw):  # its literal pieces are as written
            star = raw.find("*")
            if star < 0 and not raw.endswith("$"):  # a plain prefix
                if not path.startswith(raw):
                    continue
                rank = _decision_key(len(raw), rule.allow, rule.line)
                if best is None or rank < best:
                    best, deciding = rank, rule
                continue  # decided on its text: never compiled
            if not path.startswith(raw[:star] if star >= 0 else raw[:-1]):
                continue
            if star >= 0:
                pieces = raw[star + 1 :].removesuffix("$").split("*")
                if not all(contains(piece) for piece in pieces if piece):
                    continue  # a literal piece is nowhere in the path
        if not _first_copy(written, rule):
            continue
        rank = _rank(rule, path, grams)
        if rank is not None and (best is None or rank < best):
            best, deciding = rank, rule
    if deciding is None:
        return ALLOWED
    return _new_verdict((deciding.allow, str(deciding), deciding.line))


def _rank(rule: Rule, path: str, grams: _PathGrams | None) -> int | None:
    pattern = compile_pattern(rule.pattern)
    if (
        grams is not None
        and pattern.kind in (CONTAINS, WILDCARD)
        and not grams.contains(pattern.literal)
    ):
        return None  # the pattern's literal piece is nowhere in the path
    return _decision_key(pattern.length, rule.allow, rule.line) if pattern.matches(path) else None


#: A check whose candidate rules times the path's length exceeds this tests the
#: literal piece of each rule that can match anywhere against the path's short
#: substrings (a set lookup) instead of searching the whole path for each: 900
#: rules "/*<n>*zz" and a 2 KB URL of "a"s, a check takes 0.4 ms instead of 1.2.
_HEAVY_WORK = 1_000_000
#: Substrings up to this long are kept in sets; a longer literal is looked up by
#: its first and last _GRAM characters before the path is searched for it.
_GRAM = 4


class _PathGrams:
    """``contains(literal)`` answers ``literal in path``: once the path's substrings
    of a length are in a set, each answer is a set lookup.  One pass over the path
    makes the set of length _GRAM; a shorter length's set is made from it (the
    prefixes of its members, plus the path's last few characters), so a long path
    made of few distinct pieces costs one pass, not one per length."""

    __slots__ = ("_by_length", "_path")

    def __init__(self, path: str) -> None:
        self._path = path
        self._by_length: dict[int, set[str]] = {}

    def of_length(self, length: int) -> set[str]:
        """The path's substrings of *length* characters."""
        grams = self._by_length.get(length)
        if grams is None:
            path = self._path
            if length < _GRAM <= len(path):
                grams = {gram[:length] for gram in self.of_length(_GRAM)}
                # Starts too close to the end for a _GRAM-long substring.
                last = range(len(path) - _GRAM + 1, len(path) - length + 1)
                grams.update(path[at : at + length] for at in last)
            else:
                grams = {path[at : at + length] for at in range(len(path) - length + 1)}
            self._by_length[length] = grams
        return grams

    def contains(self, literal: str) -> bool:
        if len(literal) <= _GRAM:
            return literal in self.of_length(len(literal))
        ends = self.of_length(_GRAM)
        if literal[:_GRAM] not in ends or literal[-_GRAM:] not in ends:
            return False
        return literal in self._path


_AUTHORITY = re.compile(r"[^/?#]*")
#: An absolute URL (or a path) whose path + query is already canonical, with no
#: fragment: the common case, split off in one step.
_CANONICAL_URL = re.compile(r"(?:[^:/?#]+://[^/?#]*)?(/(?!/)[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=]*)")


class _Builder:
    """Groups, sitemaps and ignored values from the records of a file, in file order."""

    __slots__ = ("agents", "current", "groups", "ignored", "in_rules", "sitemaps")

    def __init__(self) -> None:
        self.groups: list[Group] = []
        self.sitemaps: dict[str, None] = {}  # an ordered set
        self.ignored: list[tuple[int, str]] = []
        self.current: Group | None = None
        self.agents: set[str] = set()  # the current group's
        #: An Allow/Disallow line was seen: a user-agent line starts a group (§2.1).
        self.in_rules = False

    def user_agent(self, line: int, value: str) -> None:
        if self.current is None or self.in_rules:
            self.current, self.agents, self.in_rules = Group([], line), set(), False
            self.groups.append(self.current)
        agent = STAR if _is_star(value) else group_name(value)
        if agent and agent not in self.agents:
            self.agents.add(agent)
            self.current.agents.append(agent)

    def other(self, directive: str, line: int, value: str) -> None:
        """A record that is neither a rule nor a user-agent line."""
        if directive == lexer.SITEMAP:
            if value:
                self.sitemaps[value] = None
        elif directive in (lexer.CONTENT_USAGE, lexer.CONTENT_SIGNAL):
            member = preference_line(directive, value, line) if self.current else None
            if member is not None and self.current is not None:
                self.current.preferences.append(member)
            elif len(self.ignored) < MAX_IGNORED:
                where = "" if self.current else " (before any User-agent line)"
                self.ignored.append((line, f"{LABEL[directive]}: {_shorten(value)}{where}"))
        elif self.current is None:
            return
        elif directive == lexer.CRAWL_DELAY:
            delay = parse_crawl_delay(value)
            if delay is not None:
                self.current.crawl_delays.append(delay)
            elif len(self.ignored) < MAX_IGNORED:
                self.ignored.append((line, f"Crawl-delay: {_shorten(value)}"))
        elif directive == lexer.REQUEST_RATE:
            rate = parse_request_rate(value)
            if rate is not None:
                self.current.request_rates.append(rate)
            elif len(self.ignored) < MAX_IGNORED:
                self.ignored.append((line, f"Request-rate: {_shorten(value)}"))

    def build(self, truncated: bool, lenient_lines: int) -> RobotsTxt:
        return RobotsTxt(
            self.groups,
            list(self.sitemaps),
            truncated=truncated,
            lenient_lines=lenient_lines,
            ignored=self.ignored,
        )


#: The usual spellings of the standard keys ("Disallow", "User-Agent"), found without
#: stripping and lower-casing the key.
_AS_WRITTEN = {
    spelling: directive
    for key, directive in lexer.STANDARD_KEYS.items()
    for spelling in (key, key.capitalize(), key.title(), key.upper())
}


def _parse_lines(lines: list[str], lenient: bool, truncated: bool = False) -> RobotsTxt:
    """The model of a file's lines, lexed here line by line, rules added inline: a
    record object and a generator step per line were half of a parse's time
    (``bench_core.py``'s parse figures).  A property test holds it equal to the
    reference lexer of the tests (``tests/core/reference_lexer.py``)."""
    keys = lexer.LENIENT_KEYS if lenient else lexer.STANDARD_KEYS
    typos, ws, as_written = lexer.TYPO_KEYS, lexer.WHITESPACE, _AS_WRITTEN
    allow, rule_directives, user_agent = (
        lexer.ALLOW,
        (lexer.DISALLOW, lexer.ALLOW),
        lexer.USER_AGENT,
    )
    builder = _Builder()
    lenient_lines = 0
    for number, line in enumerate(lines, 1):
        hash_at = line.find("#")
        if hash_at >= 0:
            line = line[:hash_at]
        key, colon, value = line.partition(":")
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
                lenient_lines += 1
        elif not colon:
            lenient_lines += 1
        if directive in rule_directives:
            current = builder.current
            if current is not None:  # else before any user-agent line: no group
                builder.in_rules = True
                value = value.strip(ws)
                if value:
                    current.rules.append(_new_rule((directive == allow, value, number)))
        elif directive == user_agent:
            builder.user_agent(number, value.strip(ws))
        else:
            builder.other(directive, number, value.strip(ws))
    return builder.build(truncated, lenient_lines)


def path_of(url: str) -> str:
    """The canonical path + query of an absolute URL or of a path.

    The fragment is dropped; an empty path is ``/``.
    """
    simple = _CANONICAL_URL.fullmatch(url)
    if simple is not None:
        return simple.group(1)
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

    def __init__(
        self,
        groups: list[Group],
        sitemaps: list[str],
        *,
        truncated: bool = False,
        lenient_lines: int = 0,
        ignored: list[tuple[int, str]] | None = None,
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
        self.ignored = ignored or []
        self._by_token: dict[str, list[Group]] = {}
        for group in groups:
            for agent in group.agents:
                members = self._by_token.setdefault(agent, [])
                if not members or members[-1] is not group:
                    members.append(group)
        self._selections: dict[str, GroupSelection] = {}
        self._rulesets: dict[str, RuleSet] = {}
        self._checked_once: set[str] = set()  # tokens checked once, not yet compiled
        self._memory_estimate: int | None = None

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
        if isinstance(body, str) and len(body) * 4 <= max_bytes:
            # At most 4 octets a character: a text this short is never cut.
            text = lexer.decode(body)
        else:
            raw = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
            raw, truncated = lexer.truncate(raw, max_bytes)
            text = lexer.decode(raw)
        lines = lexer.split_lines(text)
        with _collector_paused(len(lines)):
            return _parse_lines(lines, lenient, truncated)

    def memory_estimate(self) -> int:
        """An upper estimate of the bytes this object holds once a crawler has
        checked URLs against it (its rules compiled), for bounding caches by memory.

        Calibrated with ``tracemalloc`` on real files (see the tests): it counts
        every rule as compiled, so it is above what one crawler's checks make
        the file hold, by a small factor for files with one group.
        """
        if self._memory_estimate is None:
            total = _BASE_BYTES
            for group in self.groups:
                total += _GROUP_BYTES + _AGENT_BYTES * len(group.agents)
                total += sum(_RULE_BYTES + _RULE_CHAR_BYTES * len(r.pattern) for r in group.rules)
                total += _RULE_BYTES * len(group.preferences)
            total += sum(_SITEMAP_BYTES + len(sitemap) for sitemap in self.sitemaps)
            self._memory_estimate = total
        return self._memory_estimate

    # -- group selection -------------------------------------------------

    def select(self, user_agent: str) -> GroupSelection:
        """The groups that apply to *user_agent* (a product token or a full User-Agent).

        All groups naming the crawler, merged; if none does, all ``*`` groups,
        merged; otherwise none (§2.2.1).
        """
        token = product_token(user_agent)
        selection = self._selections.get(token)
        if selection is None:
            groups = self._groups_for(token)
            selection = self._selections[token] = GroupSelection(token, tuple(groups))
        return selection

    def _groups_for(self, token: str) -> list[Group]:
        return (self._by_token.get(token) if token else None) or self._by_token.get(STAR, [])

    def rules(self, user_agent: str) -> list[Rule]:
        """The rules that apply to *user_agent*, in file order."""
        return self._rules_for(product_token(user_agent))

    def _rules_for(self, token: str) -> list[Rule]:
        return [rule for group in self._groups_for(token) for rule in group.rules]

    # -- checks ----------------------------------------------------------

    def check(self, url: str, user_agent: str) -> Verdict:
        """Decide whether *user_agent* may fetch *url* (an absolute URL or a path).

        The first check for a crawler tries its rules one by one; the second
        compiles them into a :class:`RuleSet`, kept for every later check.  A broad
        crawl checks one or a few URLs of most sites, and compiling costs several
        times what one pass over the rules does.  A crawler with thousands of rules
        has them compiled at its first check, so that no later check pays for it.
        """
        path = path_of(url)
        if path.startswith("/robots.txt") and path[11:12] in ("", "?"):
            return ALLOWED  # /robots.txt is always allowed (§2.2.2)
        ruleset = self._rulesets.get(user_agent)
        if ruleset is None:
            # Compiled once per product token: rotating User-Agent strings with one
            # token share it, and the by-string shortcut stays small.
            token = product_token(user_agent)
            ruleset = self._rulesets.get(token)
            if ruleset is None:
                rules = self._rules_for(token)
                if token not in self._checked_once and len(rules) <= _ONE_PASS_AT:
                    self._checked_once.add(token)
                    return _first_check(rules, path)
                ruleset = self._rulesets[token] = RuleSet(rules)
            if len(self._rulesets) < _MAX_SHORTCUTS:
                self._rulesets[user_agent] = ruleset
        return ruleset.decide(path)

    def prepare(self, user_agent: str) -> None:
        """Compile the rules that apply to *user_agent* now, as its second check
        would (for a caller that parses big files away from its event loop, so
        that no check there pays for compiling)."""
        token = product_token(user_agent)
        if token not in self._rulesets:
            self._rulesets[token] = RuleSet(self._rules_for(token))

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

    def preferences(self, url: str, user_agent: str) -> Preferences:
        """What the file says about the use of *url*'s content by *user_agent*:
        the ``Content-Usage`` and ``Content-Signal`` lines of the groups that apply,
        the longest matching path deciding.  None where the crawler may not go."""
        groups = self.select(user_agent).groups
        members = [member for group in groups for member in group.preferences]
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


#: The parts of :meth:`RobotsTxt.memory_estimate`, in bytes: the object itself, a
#: group, one of its user-agents, a rule (stored, then compiled) and each character
#: of its pattern (kept in the rule, its verdict and the index), a sitemap.
_BASE_BYTES = 3_500
_GROUP_BYTES = 400
_AGENT_BYTES = 150
_RULE_BYTES = 1_500
_RULE_CHAR_BYTES = 3
_SITEMAP_BYTES = 150

#: A crawler with more rules than this has them compiled at its first check: a
#: second check would pay for the compiling then, more than any later check may cost.
_ONE_PASS_AT = 2_000

#: How many User-Agent strings (besides tokens) a file remembers the rule set of.
_MAX_SHORTCUTS = 16

#: How many ignored records a :class:`RobotsTxt` remembers (for reports).
MAX_IGNORED = 20


def _shorten(value: str, limit: int = 40) -> str:
    return value if len(value) <= limit else f"{value[:limit]}... ({len(value)} characters)"


def _is_star(value: str) -> bool:
    # "*" alone; a "*" followed by whitespace and a comment-like tail is still the
    # star group (what Google and most parsers do with "User-agent: * ignored").
    return value == STAR or (value.startswith(STAR) and value[1:2].isspace())
