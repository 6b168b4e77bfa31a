"""An index of wildcard rules by their literal pieces, for files with thousands of them.

A rule such as ``/*12345*ab`` can match anywhere in a path: no prefix tree narrows
it down, and a file of 25,000 of them would cost every check 25,000 tries.  Here
each rule is filed under one *key*: a literal piece it needs (its head, a segment
or its tail), cut to :data:`KEY_LENGTH` characters, chosen as the key fewest rules
of the file share.  A check looks up only the keys present in the path (its
substrings, and for a tail's key its ends), so a rule whose key is absent costs
nothing but its key's place among the sorted keys, which the check bisects or,
for a long path, scans in C.

Each candidate is then tried with its segments' first and last positions in the
path, found once per check and shared by every rule that names the same segment
(see :meth:`PieceIndex.first_match`).

What it pays, on hostile files of about 25,000 rules and a 2 KB URL of digits
holding their pieces (a 2-core machine): for ``/*<n>*ab``, a later check takes
0.02 ms with the index against 55 ms with the rules left to the prefix tree (which
tries every one of them at its root), and the rule set is built in 88 ms against
136; for ``/*a<n>*b$``, 0.03 against 47 ms, built in 87 against 206.  What it
costs: for ``/*<n>``, whose first rules in decision order match such a path, a
later check takes 3.2 ms (gathering the path's substrings, and scanning 29,000
keys for them) against the tree's 0.06.  Files with fewer than
:data:`~._prefixtree.PIECE_INDEX_AT` such rules do not use it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import chain, compress, count, filterfalse, repeat
from operator import ge, gt, itemgetter, sub
from typing import Any

from ._pattern import has_literal_wildcard, shape

#: Keys are a piece's first characters, at most this many: the path's substrings of
#: each length up to it are what a check looks keys up in.
KEY_LENGTH = 8
#: A piece cut to a key.
cut_key = itemgetter(slice(None, KEY_LENGTH))
#: The most common keys, at most this many, if more than 1 / _COMMON_SHARE of the
#: rules name each: where one is absent from a path, or found only before where its
#: rules may need it, no rule that names it is tried (a check that all of them name
#: is over at once; others drop them when it has more candidates than _DROP_AT).
_COMMON_KEYS = 2
_COMMON_SHARE = 4
_DROP_AT = 500
#: A key looked up by bisection costs about what this many keys scanned do.
_BISECTIONS = 10


#: What trying a rule needs: its head, segments, tail, and the least length a
#: matching path has before its last segment or tail starts.
_Shape = tuple[str, list[str], str, int]


def _shape_of(text: str) -> _Shape:
    """:func:`._pattern.shape` of *text*, and the least length before its last piece;
    without ``shape()`` for a text with no "**" or escape (0.4 µs instead of 0.7: a
    first check may shape thousands of candidates)."""
    anchored = text[-1] == "$"
    pieces = (text[:-1] if anchored else text).split("*")
    named = pieces[1:]
    if "" in named or "%2" in text:  # "**", a trailing "*", a literal "*" or "$"
        head, segments, tail = shape(text)
        named = [*segments, tail] if tail else segments
        return head, segments, tail, len(head) + sum(map(len, named)) - len(named[-1])
    segments, tail = (named[:-1], named[-1]) if anchored else (named, "")
    # The pieces' length (the text's, less its "*"s and "$"), less the last's.
    return pieces[0], segments, tail, len(text) - anchored - len(named) - len(named[-1])


#: Rules whose pieces :func:`_piece_runs` makes, and :func:`_rarest_keys` chooses
#: from, at once: the piece index of 25,000 rules ``/*<i>*<j>*zz`` was built in 52 ms
#: with runs of 64 or 256 rules, 80 with 4,096, 87 all at once (least of 11 runs).
_RUN = 256

#: A run's pieces: how many each rule has, and all of them rule after rule; or 0,
#: and a list for each rule, where the rules' counts differ.
_Run = tuple[int, list[Any]]


def _piece_runs(texts: list[str]) -> Iterator[_Run]:
    """The literal pieces a path that matches each of *texts* has, :data:`_RUN`
    rules at a time: its head (but a head "/*" starts with, which every path has),
    segments and tail, some maybe empty.  A tail keeps its "$" anchor: cut to a key,
    a tail of fewer than KEY_LENGTH characters is then a key ending with "$", looked
    up among the path's ends.

    Made a run at a time, which :func:`_rarest_keys` chooses from.  A run whose
    rules all have as many pieces is split all at once, joined (as a hostile
    file's are)."""
    literal = has_literal_wildcard(texts)  # decoded: a piece ends before its first "$"
    for start in range(0, len(texts), _RUN):
        if literal:
            shaped = map(shape, texts[start : start + _RUN])
            pieces = ([head, *segments, tail] for head, segments, tail in shaped)
            yield 0, [[piece.partition("$")[0] for piece in each] for each in pieces]
            continue
        run = list(map(str.removeprefix, texts[start : start + _RUN], repeat("/*")))
        stars = set(map(str.count, run, repeat("*")))
        if len(stars) == 1:
            yield stars.pop() + 1, "*".join(run).split("*")
        else:
            yield 0, list(map(str.split, run, repeat("*")))


def _rarest_keys(runs: Iterable[_Run], counts: Counter[str]) -> list[str]:
    """Each rule's rarest key (its pieces cut to KEY_LENGTH, *counts* of them in the
    file; the last on a tie), from :func:`_piece_runs`.

    Where a run's rules all have as many pieces, chosen a column at a time, in C;
    others rule by rule.  Making the pieces and choosing (least and median of 7
    runs, alternated with choosing rule by rule): 29,000 rules ``/*<n>`` 14-18 ms
    instead of 65-78 (38-44 in other runs), 25,000 ``/*<n>*zz`` 19-21 instead of
    39-40, ``/*a<n>*b$`` 19-22 instead of 37-38.  With three pieces a rule
    (``/*<i>*<j>*zz``) a column at a time too: the piece index built in 52 ms
    instead of 72 (least of 25 runs, alternated)."""
    count_of = counts.__getitem__
    rarest = partial(min, key=count_of)
    chosen: list[str] = []
    for size, pieces in runs:
        if not size:
            chosen += map(rarest, map(reversed, map(list, map(map, repeat(cut_key), pieces))))
            continue
        # The last column first; an earlier one replaces it where strictly rarer.
        best = list(map(cut_key, pieces[size - 1 :: size]))
        for column in range(size - 2, -1, -1):
            keys = list(map(cut_key, pieces[column::size]))
            counted = zip(keys, best, map(count_of, keys), map(count_of, best), strict=True)
            best = [key if fewer < most else kept for key, kept, fewer, most in counted]
        chosen += best
    return chosen


class PieceIndex:
    """Rules that need literal pieces found in the path, filed by their rarest piece.

    The rules come column by column, in decision order: their decision keys
    (smaller decides first), their patterns' text forms (see
    :func:`._pattern.pattern_texts`), and what :meth:`first_match` returns for each
    (a number below 2**32: where the caller holds the rule).
    A rule is shaped for matching (split into its pieces) the first time it is a
    candidate: most rules of a hostile file never are, and the index is built at a
    crawler's first check.
    """

    __slots__ = (
        "_common",
        "_decision_keys",
        "_holders",
        "_key_lengths",
        "_keys",
        "_needs",
        "_places",
        "_positions",
        "_shapes",
        "_texts",
    )

    def __init__(
        self, decision_keys: Iterable[int], texts: list[str], places: Iterable[int]
    ) -> None:
        # A rule's keys are its pieces, cut, made once and held while the keys are
        # counted and chosen (made twice instead, a run at a time, a hostile file's
        # index took 7 ms more to build, for 3% less peak on the 500 KiB real-shaped
        # file).
        # How many rules name each key: a rule's rarest key rejects it, and the
        # fewest others, when it is absent from a path.  An empty piece ("**") is in
        # every path, and "$" (of "*$") ends every path: never chosen over another.
        # On a tie the last key is chosen: a tail's, looked up among the path's ends
        # only (25,000 rules "/*<i>*<j>$" with 158 of each, the path holding every
        # <i>: 158 candidates instead of all).
        runs = list(_piece_runs(texts))
        counts: Counter[str] = Counter()
        for size, pieces in runs:
            counts.update(map(cut_key, pieces if size else chain.from_iterable(pieces)))
        counts[""] = counts["$"] = len(texts) + 1
        # The rules' keys, sorted, and the position of each: a check looks its path's
        # substrings up by bisection, or, when they outnumber the keys a tenth, scans
        # the keys for them in C (29,000 keys in 1.3 ms).  Keys filed in a dictionary
        # were looked up faster but held 1.5 MiB more for 29,000 rules (an entry and
        # a number each): 12x a hostile file's size, where this holds 9x.
        chosen = _rarest_keys(runs, counts)
        del runs
        by_key = sorted(range(len(chosen)), key=chosen.__getitem__)
        self._keys = list(map(chosen.__getitem__, by_key))
        self._positions = array("I", by_key)
        del chosen, by_key
        # The rules' parts in lists of their own (a tuple a rule held 64 bytes more:
        # 1.5 MiB for 25,000 rules), their decision keys in an array (the numbers
        # held 24 bytes more each).
        self._decision_keys = array("q", decision_keys)
        self._texts = texts
        self._places: array[int] = array("I", places)
        # The few keys most of the rules name ("zz" of "/*<i>*<j>*zz"): where one is
        # absent from a path, or found only too early, its rules are all dropped at once.
        # Not "" or "$", nor a literal "*" (that a text holds "a*b" does not mean its
        # rule needs it).
        many = compress(counts, map(gt, counts.values(), repeat(len(texts) // _COMMON_SHARE)))
        common = [key for key in many if key.strip("$") and "*" not in key]
        self._common = sorted(common, key=counts.__getitem__)[-_COMMON_KEYS:]
        self._holders: dict[str, frozenset[int]] = {}  # their rules, made when needed
        self._needs: dict[str, tuple[bool, int]] = {}  # see _need_of
        # The lengths of the keys looked up among the path's substrings; those of a
        # tail shorter than KEY_LENGTH, with its "$", are looked up among its ends.
        keys = self._keys
        if "$" in "".join(keys):  # 0.1 ms where a pass over 25,000 keys takes 2
            keys = [key for key in keys if key[-1:] != "$"]
        self._key_lengths = sorted(set(map(len, keys)))
        self._shapes: dict[int, _Shape] = {}  # by position

    def _holders_of(self, key: str) -> frozenset[int]:
        """The positions of the rules that name *key*: those whose text holds it (a
        common key holds no "*": it lies within one of the rule's pieces)."""
        holders = self._holders.get(key)
        if holders is None:
            found = compress(count(), map(str.__contains__, self._texts, repeat(key)))
            holders = self._holders[key] = frozenset(found)
        return holders

    def _need_of(self, key: str) -> tuple[bool, int]:
        """Whether every rule names the common *key*, and the least position in a
        path where one that names it may need it: each literal character before the
        key's last place in the rule's text is one of the path's before it ("*" may
        be none).  0 when a text spells a literal "*" or "$" (3 characters in the
        text, 1 in the path)."""
        need = self._needs.get(key)
        if need is None:
            texts = self._texts
            places = list(map(str.rfind, texts, repeat(key)))
            every = -1 not in places
            earliest = 0
            if not has_literal_wildcard(texts):
                if not every:  # the rules that name it
                    holding = list(map(ge, places, repeat(0)))
                    texts, places = list(compress(texts, holding)), list(compress(places, holding))
                stars = map(str.count, texts, repeat("*"), repeat(0), places)
                earliest = min(map(sub, places, stars), default=0)
            need = self._needs[key] = (every, earliest)
        return need

    def _may_match(self, key: str, path: str, ends: set[str]) -> bool:
        """False when no rule that names the common *key* can find it in *path*."""
        if key[-1] == "$":
            return key in ends
        last = path.rfind(key)
        if last < 0:
            return False
        if key not in self._needs:
            # Found where the first rule that names it may need it: no pass over every
            # rule (a first check of 24,000 rules "/ab*<n>*a", whose head is common,
            # spent 6 ms in such passes instead of 11).
            texts = self._texts
            first = next(compress(texts, map(str.__contains__, texts, repeat(key))), "")
            at = first.rfind(key)
            if at >= 0 and last >= at - first.count("*", 0, at):
                return True
        return last >= self._need_of(key)[1]

    def _positions_of(self, keys: set[str]) -> list[int]:
        """The positions of the rules filed under any of *keys*, in decision order."""
        filed, positions = self._keys, self._positions
        if len(keys) * _BISECTIONS > len(filed):
            found = list(compress(positions, map(keys.__contains__, filed)))
        else:
            found = []
            for key in keys:
                at = bisect_left(filed, key)
                if at < len(filed) and filed[at] == key:
                    found += positions[at : bisect_right(filed, key, at)]
        found.sort()
        return found

    def first_match(self, path: str, grams: Callable[[int], set[str]], before: int) -> int | None:
        """The place of the first rule in decision order, with a key below *before*,
        that matches *path*; ``None`` if none does.  *grams(n)* is the set of the path's
        substrings of length *n*."""
        ends = {path[-n:] + "$" for n in range(1, KEY_LENGTH)}
        # The common keys no rule that names them can find in the path: absent, or
        # only before where any of those rules may need them.
        missing = [key for key in self._common if not self._may_match(key, path, ends)]
        if any(self._need_of(key)[0] for key in missing):
            return None  # every rule names one of them (25,000 rules "/*<n>*ab")
        found = self._positions_of(
            ends.union(*[grams(n) for n in self._key_lengths if n <= len(path)])
        )
        if missing and len(found) > _DROP_AT:
            dropped = frozenset().union(*map(self._holders_of, missing))
            found = list(filterfalse(dropped.__contains__, found))
        # Each segment's first and last start in the path, found once per check for
        # every rule that names it: a segment found first where it may start, or
        # last before it may, decides without a search of its own.
        firsts: dict[str, int] = {}
        lasts: dict[str, int] = {}
        # Segments found nowhere in the path: a rule that names one is rejected before
        # any search of its own (25,000 rules "/*aaaaaaaaaa*<n>" against a path of
        # digits, 2,700 candidates: a check in 2.9 ms instead of 5.3, worst_checks).
        absent: set[str] = set()
        find, rfind = path.find, path.rfind
        shapes = self._shapes
        last_tried = bisect_left(self._decision_keys, before)  # in decision order
        for position in found:
            if position >= last_tried:
                break
            shaped = shapes.get(position)
            if shaped is None:
                shaped = shapes[position] = _shape_of(self._texts[position])
            head, segments, tail, before_last = shaped
            if not absent.isdisjoint(segments):
                continue
            if tail:
                if len(path) - len(tail) < before_last or not path.endswith(tail):
                    continue
            else:
                # Where the last segment starts at the latest: too early, and no search.
                segment = segments[-1]
                last = lasts.get(segment)
                if last is None:
                    last = lasts[segment] = rfind(segment)
                    if last < 0:
                        absent.add(segment)
                if last < before_last:
                    continue
            if not path.startswith(head):
                continue
            # What wildcard_matches() does, inline: a call per candidate made the worst
            # check found 10% slower (6.9 ms instead of 6.2, bench_core.worst_checks).
            pos = len(head)
            for segment in segments:
                first = firsts.get(segment)
                if first is None:
                    first = firsts[segment] = find(segment)
                    if first < 0:
                        absent.add(segment)
                        break
                if first < pos:
                    last = lasts.get(segment)
                    if last is None:
                        last = lasts[segment] = rfind(segment)
                    # The leftmost occurrence at or after pos, if any (the last is one).
                    first = find(segment, pos) if last >= pos else -1
                    if first < 0:
                        break
                pos = first + len(segment)
            else:
                if len(path) - len(tail) >= pos:
                    return self._places[position]
        return None
