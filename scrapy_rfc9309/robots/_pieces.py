"""An index of wildcard rules by their literal pieces, for files with thousands of them.

A rule such as ``/*12345*ab`` can match anywhere in a path: no prefix tree narrows
it down, and a file of 25,000 of them would cost every check 25,000 tries.  Here
each rule is filed under one *key*: a literal piece it needs (its head after the
``/``, a segment or its tail), cut to :data:`KEY_LENGTH` characters, chosen as the
key fewest rules of the file share.  A check looks up only the keys present in the
path (set intersections over the path's substrings, done in C), so a rule whose key
is absent costs nothing, and a file of distinct rules costs what the rules that
could match do.

Each candidate is then tried with its segments' first and last positions in the
path, found once per check and shared by every rule that names the same segment
(see :meth:`PieceIndex.first_match`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from ._pattern import Pattern

#: Keys are a piece's first characters, at most this many: the path's substrings of
#: each length up to it are what a check looks keys up in.
KEY_LENGTH = 8


#: An indexed rule: its decision key, head, segments, tail, the least length a
#: matching path has before its last segment or tail starts, and the rule.
_Entry = tuple[int, str, tuple[str, ...], str, int, Any]


class PieceIndex:
    """Rules that need literal pieces found in the path, filed by their rarest piece.

    *rules* are ``(key, pattern, rule)``: the rule's decision key (smaller decides
    first), its compiled pattern, and what :meth:`first_match` returns for it.
    """

    __slots__ = ("_by_length",)

    def __init__(self, rules: Sequence[tuple[int, Pattern, Any]]) -> None:
        # Built for files of 25,000 rules at a crawler's first check: C iterators where
        # they do, then one loop without a comprehension per rule (one cost 0.5 us a
        # rule more, measured).
        key_of = itemgetter(slice(None, KEY_LENGTH))
        head_key_of = itemgetter(slice(1, KEY_LENGTH + 1))
        patterns = [pattern for _, pattern, _ in rules]
        # How many rules name each key: a rule's rarest key rejects it, and the
        # fewest others, when it is absent from a path.
        rarity = Counter(
            chain(
                map(key_of, chain.from_iterable(pattern.segments for pattern in patterns)),
                (pattern.tail[:KEY_LENGTH] for pattern in patterns),
                (head_key_of(pattern.head) for pattern in patterns),
            )
        ).__getitem__
        by_length: dict[int, dict[str, list[_Entry]]] = {}
        for decision_key, pattern, rule in rules:
            head, segments, tail = pattern.head, pattern.segments, pattern.tail
            keys = list(map(key_of, segments))
            if tail:
                keys.append(tail[:KEY_LENGTH])
            if len(head) > 1:
                keys.append(head[1 : KEY_LENGTH + 1])
            key = min(keys, key=rarity) if len(keys) > 1 else keys[0]
            # The least length a matching path has before its last piece starts.
            before_last = len(head) + sum(map(len, segments)) - (0 if tail else len(segments[-1]))
            entry = (decision_key, head, segments, tail, before_last, rule)
            filed = by_length.get(len(key))
            if filed is None:
                filed = by_length[len(key)] = {}
            entries = filed.get(key)
            if entries is None:
                filed[key] = [entry]
            else:
                entries.append(entry)
        #: By key length: the keys (to intersect with the path's substrings of that
        #: length, in C) and the rules filed under each.
        self._by_length = {n: (frozenset(filed), filed) for n, filed in by_length.items()}

    def first_match(self, path: str, grams: Callable[[int], set[str]], before: int) -> Any:
        """The first rule in decision order, with a key below *before*, that matches
        *path*; ``None`` if none does.  *grams(n)* is the set of the path's
        substrings of length *n*."""
        found: list[_Entry] = []
        for length, (keys, filed) in self._by_length.items():
            if length <= len(path):
                for key in grams(length) & keys:
                    found.extend(filed[key])
        found.sort()  # in decision order: the keys differ
        # Each segment's first and last start in the path, found once per check for
        # every rule that names it: a segment found first where it may start, or
        # last before it may, decides without a search of its own.
        firsts: dict[str, int] = {}
        lasts: dict[str, int] = {}
        find, rfind = path.find, path.rfind
        for decision_key, head, segments, tail, before_last, rule in found:
            if decision_key >= before:
                break
            if tail:
                if len(path) - len(tail) < before_last or not path.endswith(tail):
                    continue
            else:
                # Where the last segment starts at the latest: too early, and no search.
                segment = segments[-1]
                last = lasts.get(segment)
                if last is None:
                    last = lasts[segment] = rfind(segment)
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
                    return rule
        return None
