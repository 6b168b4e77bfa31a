"""The rule set: a crawler's rules indexed by their literal start in a prefix tree.

Built at a crawler's second check of a file (the first is :mod:`._onepass`'s).  On
the tests' corpus (the 197 files with crawled URLs, ``MyCrawler``; a 2-core
machine) it is built in 27-32 us at the median file (31-34 ms for all of them)
and decides a check in 0.34 us (the path's canonical form, made before, takes
0.49 us more).  A set of at most :data:`LEAF_SIZE` rules is one leaf; the tree
pays for itself on long files: a check tries the rules under the path's prefix,
not all of them.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import compress, repeat
from operator import itemgetter, not_
from typing import Any

from ._collector import collector_paused
from ._grams import HEAVY_WORK, PathGrams
from ._model import (
    ALLOWED,
    LAST,
    LINE_MASK,
    RuleColumns,
    Verdict,
    Written,
    decision_key,
    decision_keys,
    first_copy,
    verdict_of,
)
from ._pattern import (
    CONTAINS,
    EXACT,
    PREFIX,
    SUFFIX,
    WILDCARD,
    Pattern,
    compile_pattern,
    compile_text,
    heads,
    literal_lengths,
    pattern_texts,
    wildcard_matches,
)
from ._pieces import PieceIndex

# A rule ready for matching: (kind, literal, start or the Pattern itself for a
# WILDCARD, verdict), see ._pattern.
# A plain tuple: decide() unpacks thousands of them per check.
_Candidate = tuple[int, str, Any, Verdict]


#: More rules that need literal pieces than this, and they go to a PieceIndex: its
#: lookups cost a check about 1 ms with a 2 KB URL, what trying this many costs.
PIECE_INDEX_AT = 1_000

#: A rule set whose rules start with at most this many literal starts first tests a
#: path against them all at once (one ``str.startswith``).
_FAST_HEADS = 64

#: A trie node with at most this many candidate rules is not split further.
LEAF_SIZE = 16
#: Deeper than this, nodes are not split (bounds recursion on pathological files).
_MAX_DEPTH = 200


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
        "_at_root",
        "_at_root_literals",
        "_candidates",
        "_heads",
        "_keys_by_line",
        "_order",
        "_pieces",
        "_positions_by_start",
        "_root",
        "_rules",
        "_starts",
        "_texts",
    )
    _at_root: tuple[_Candidate, ...]
    _at_root_literals: tuple[str, ...] | None
    _candidates: dict[int, _Candidate]  # by position in _order, once compiled
    _heads: tuple[str, ...] | None
    _keys_by_line: dict[int, int]  # the tree's rules' decision keys
    _order: array[int]  # the tree's rules, in decision order, by place in _rules
    _pieces: PieceIndex | None
    _positions_by_start: array[int]
    _root: _Node
    _rules: RuleColumns  # the crawler's rules
    _texts: list[str]  # the tree's patterns' texts, in decision order
    _starts: list[str]

    def __init__(self, rules: RuleColumns) -> None:
        """*rules*: the patterns and :func:`._model.rule_key` of a crawler's rules."""
        if len(rules[0]) <= LEAF_SIZE:
            self._few(rules)
            return
        with collector_paused(len(rules[0])):
            self._index(rules)

    def _few(self, rules: RuleColumns) -> None:
        """The rule set of a crawler with a leaf's worth of rules (most real files):
        the tree :meth:`_index` builds for them is one leaf, made here rule by rule
        (its passes over all rules at once cost such a set 2.2 times as much:
        65 against 30 us, medians of the corpus's 155 such files)."""
        written: Written = (set(), set())
        ordered = []
        for raw, key in zip(*rules, strict=True):
            if first_copy(written, raw, key):
                pattern = compile_pattern(raw)
                if pattern.text.startswith(("/", "*")):  # a path starts with "/"
                    order = decision_key(pattern.length, key)
                    ordered.append((order, pattern.text, pattern, raw, key))
        ordered.sort(key=itemgetter(0))  # the keys differ: their lines do
        candidates: list[_Candidate] = []
        at_root: list[_Candidate] = []
        starts: list[str] = []  # the literal starts longer than "/"
        firsts = _first_copies(map(itemgetter(1), ordered))
        for _, _, pattern, raw, key in compress(ordered, firsts):
            candidate = _candidate_of(pattern, raw, key)
            candidates.append(candidate)
            if pattern.head in ("", "/"):
                at_root.append(candidate)
            else:
                starts.append(pattern.head)
        # Only what decide() reads: the tree's building state stays unset.
        self._pieces = None
        self._root = _Node(None, tuple(candidates))
        self._heads = tuple(starts)
        self._at_root = tuple(at_root)
        self._at_root_literals = _literals(self._at_root)

    def _index(self, rules: RuleColumns) -> None:
        # Built for a file's 30,000 rules too (at a crawler's first check): each step
        # is one pass, in C where it can be, that makes as few objects per rule as it
        # can; a rule is compiled only when a check first needs it.
        raws, rule_keys = rules
        repeated = len(set(raws)) < len(raws)
        if repeated:
            written: Written = (set(), set())  # 36,000 copies of a line: one is kept
            kept = list(map(first_copy, repeat(written), raws, rule_keys))
            raws, rule_keys = list(compress(raws, kept)), array("Q", compress(rule_keys, kept))
            del kept
        self._rules = raws, rule_keys
        texts = pattern_texts(raws)
        # Two patterns the same once canonical ("/a%7e", "/a~"), or one as an Allow
        # and a Disallow: only the first in decision order can decide.
        may_repeat = repeated or texts != raws
        keys = list(decision_keys(literal_lengths(texts), rule_keys))
        # Every path starts with "/": a pattern that starts otherwise ("a*") never matches.
        usable = compress(range(len(raws)), map(str.startswith, texts, repeat(("/", "*"))))
        # The rules' places in _rules, in decision order.  Places sorted by their key,
        # not (key, text, place) tuples: 22 instead of 27 us for a real file's 57
        # rules, 1.0 instead of 4.7 ms for 25,000.
        order = sorted(usable, key=keys.__getitem__)  # the keys differ
        del raws, rule_keys, rules  # what follows peaks: hold no more than needed
        texts = list(map(texts.__getitem__, order))
        if may_repeat and len(set(texts)) < len(texts):
            firsts = _first_copies(texts)
            order, texts = list(compress(order, firsts)), list(compress(texts, firsts))
        self._pieces = None
        self._keys_by_line = {}
        # With many rules that need literal pieces found anywhere in the path (a "*"
        # with a literal piece after it), those go to a PieceIndex, and the prefix
        # tree keeps the others.
        if len(order) > PIECE_INDEX_AT:  # else never that many: not looked for
            in_pieces = list(need_pieces(texts))
            if sum(in_pieces) > PIECE_INDEX_AT:
                indexed = list(compress(order, in_pieces))
                self._pieces = PieceIndex(
                    map(keys.__getitem__, indexed), list(compress(texts, in_pieces)), indexed
                )
                in_tree = list(map(not_, in_pieces))
                order, texts = list(compress(order, in_tree)), list(compress(texts, in_tree))
                rule_keys = self._rules[1]
                self._keys_by_line = {rule_keys[place] & LINE_MASK: keys[place] for place in order}
        del keys
        # The tree's rules in decision order; compiled into candidates when a node
        # that holds them is first reached (a crawl reaches few of a long file's nodes).
        # Places and texts in an array and a list of their own: a tuple a rule held 56
        # bytes more.
        self._order = array("I", order)
        self._texts = texts
        del order
        self._candidates = {}
        # The tree's rules sorted by literal start: the rules below any node are then
        # a range of these, and its children's ranges are found by bisection.
        # (Positions sorted by their start, not (start, position) pairs: a pair
        # each was a tenth of a first check's peak memory on a 500 KiB file; held in
        # an array, not as numbers: 8 bytes a rule instead of 40.)
        unsorted = heads(texts)
        by_start = sorted(range(len(texts)), key=unsorted.__getitem__)
        self._starts = list(map(unsorted.__getitem__, by_start))
        self._positions_by_start = array("q", by_start)
        del unsorted, by_start
        below_root = bisect_left(self._starts, "/\0")  # after "" and "/": no literal start
        ended = self._cut(self._positions_by_start[:below_root])
        self._root = self._build(below_root, len(texts), 0, ended)
        self._heads = self._fewest_heads(below_root)
        self._at_root = self._pick(ended) if self._heads is not None else ()
        self._at_root_literals = _literals(self._at_root)

    def _fewest_heads(self, below_root: int) -> tuple[str, ...] | None:
        """The literal starts longer than "/" that every tree rule but the root's
        begins with, none of them a prefix of another; ``None`` when they are
        more than :data:`_FAST_HEADS`, or the piece index holds rules."""
        if self._pieces is not None:
            return None
        fewest: list[str] = []
        for start in self._starts[below_root:]:  # sorted: a prefix comes first
            if not fewest or not start.startswith(fewest[-1]):
                fewest.append(start)
                if len(fewest) > _FAST_HEADS:
                    return None
        return tuple(fewest)

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
        if high - low <= LEAF_SIZE or depth >= _MAX_DEPTH:
            limit = ended[-1] if ended and self._is_prefix(ended[-1]) else len(self._texts)
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
                ending = self._cut([*ended, *positions[low:going]])
                children[char] = self._build(going, end, depth + 1, ending)
            else:  # the same ended rules: share the tuple
                children[char] = self._build(going, end, depth + 1, ended, ended_candidates)
            low = end
        node.children, node.candidates, node.pending = children, ended_candidates, None

    def _cut(self, ended: Iterable[int]) -> list[int]:
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
            place = self._order[position]
            raws, keys = self._rules
            pattern = compile_text(self._texts[position])
            candidate = _candidate_of(pattern, raws[place], keys[place])
            self._candidates[position] = candidate
        return candidate

    def decide(self, path: str) -> Verdict:
        """The verdict for a canonical path + query (it starts with ``/``)."""
        heads = self._heads
        if heads is not None and not path.startswith(heads):
            # Only the rules at the root can match (they start with "/*" or are "/").
            literals = self._at_root_literals
            if literals is not None and not any(map(path.__contains__, literals)):
                return ALLOWED
            return first_candidate(self._at_root, path, None)
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
        heavy = self._pieces is not None or len(path) * len(candidates) > HEAVY_WORK
        grams = PathGrams(path) if heavy else None
        verdict = first_candidate(candidates, path, grams)
        if self._pieces is None:
            return verdict
        assert grams is not None
        before = self._keys_by_line[verdict.line] if verdict.line else LAST
        place = self._pieces.first_match(path, grams.of_length, before)
        if place is None:
            return verdict
        raws, keys = self._rules
        return verdict_of(raws[place], keys[place])


def _candidate_of(pattern: Pattern, raw: str, key: int) -> _Candidate:
    """The rule of *raw* and its :func:`._model.rule_key`, its *pattern* compiled,
    ready for :func:`first_candidate`."""
    kind = pattern.kind
    verdict = verdict_of(raw, key)
    return (kind, pattern.literal, pattern if kind == WILDCARD else pattern.start, verdict)


def need_pieces(texts: Iterable[str]) -> Iterator[bool]:
    """For each of *texts* (text forms, or raw patterns for an estimate), whether its
    rule needs a literal piece found anywhere in the path (a "*" with a literal piece
    after it): with more than :data:`PIECE_INDEX_AT` of them, those rules go to a
    :class:`PieceIndex`."""
    ends = map(str.rstrip, texts, repeat("$*"))  # "$" ends a text form, if anywhere
    return map(str.__contains__, ends, repeat("*"))


def _first_copies(texts: Iterable[str]) -> list[bool]:
    """For each of *texts* (the rules' patterns in text form, in decision order),
    whether no earlier rule has it: a pattern the same once canonical as an earlier
    one's ("/a%7e" and "/a~", or an Allow's pattern written as a Disallow) never
    decides, the earlier one always matching first."""
    seen: set[str] = set()
    firsts = []
    for text in texts:
        firsts.append(text not in seen)
        seen.add(text)
    return firsts


def _literals(candidates: tuple[_Candidate, ...]) -> tuple[str, ...] | None:
    """The literals of *candidates*, one of which a path holds if any of them matches
    (a rule matches only a path that holds its literal); ``None`` for fewer than
    three: a real file's 7 rules at the root tried one by one took 0.92 us a check,
    the test that the path holds none of their literals 0.49 (a regular expression
    of them 0.36, but it doubled what some files hold)."""
    return tuple({candidate[1] for candidate in candidates}) if len(candidates) >= 3 else None


def first_candidate(
    candidates: tuple[_Candidate, ...], path: str, grams: PathGrams | None
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
