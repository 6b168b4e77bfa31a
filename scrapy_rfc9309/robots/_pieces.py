"""An index of wildcard rules by their literal pieces, for files with thousands of them.

A rule such as ``/*12345*ab`` can match anywhere in a path: no prefix tree narrows
it down, and a file of 25,000 of them would cost every check 25,000 tries.  Here
each rule is filed under one *key*: a literal piece it needs (its head after the
``/``, a segment or its tail), cut to :data:`KEY_LENGTH` characters, chosen as the
key fewest rules of the file share.  A check looks up only the keys present in the
path (set intersections over the path's substrings, done in C), so a rule whose key
is absent costs nothing, and a file of distinct rules costs what the rules that
could match do.

Each candidate is then tried with its segments' first positions in the path, found
once per check and shared by every rule that names the same segment (see
:func:`_matches`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain
from operator import itemgetter

from ._pattern import Parts

#: Keys are a piece's first characters, at most this many: the path's substrings of
#: each length up to it are what a check looks keys up in.
KEY_LENGTH = 8


#: An indexed rule: its position in decision order, head, segments, tail, and the
#: least length a matching path has before its last segment or tail starts.
_Entry = tuple[int, str, tuple[str, ...], str, int]


class PieceIndex:
    """Rules that need literal pieces found in the path, filed by their rarest piece.

    *rules* are ``(position, parts)``: the rule's place in decision order (smaller
    decides first) and its compiled pattern.
    """

    __slots__ = ("_by_length", "_size")

    def __init__(self, rules: Sequence[tuple[int, Parts]]) -> None:
        # Built for files of 25,000 rules at a crawler's first check: one loop, no
        # comprehension per rule (one cost 0.5 us a rule more, measured).
        key_of = itemgetter(slice(None, KEY_LENGTH))
        keyed: list[tuple[list[str], _Entry]] = []
        for position, parts in rules:
            head, segments, tail = parts[5], parts[6], parts[7]
            keys = list(map(key_of, segments))
            if tail:
                keys.append(tail[:KEY_LENGTH])
            if len(head) > 1:
                keys.append(head[1 : KEY_LENGTH + 1])
            # The least length a matching path has before its last piece starts.
            before_last = len(head) + sum(map(len, segments)) - (0 if tail else len(segments[-1]))
            keyed.append((keys, (position, head, segments, tail, before_last)))
        self._size = len(keyed)
        # How many rules name each key: a rule's rarest key rejects it, and the
        # fewest others, when it is absent from a path.
        rarity = Counter(chain.from_iterable(keys for keys, _ in keyed)).__getitem__
        by_length: dict[int, dict[str, list[_Entry]]] = {}
        for keys, entry in keyed:
            key = min(keys, key=rarity) if len(keys) > 1 else keys[0]
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

    def __len__(self) -> int:
        return self._size

    def first_match(self, path: str, grams: Callable[[int], set[str]], before: int) -> int:
        """The position of the first rule in decision order, placed before *before*,
        that matches *path*; -1 if none does.  *grams(n)* is the set of the path's
        substrings of length *n*."""
        found: list[_Entry] = []
        for length, (keys, filed) in self._by_length.items():
            if length <= len(path):
                for key in grams(length) & keys:
                    found.extend(filed[key])
        found.sort()  # in decision order: positions differ
        # Each segment's first and last start in the path, found once per check for
        # every rule that names it: a segment found first where it may start, or
        # last before it may, decides without a search of its own.
        firsts: dict[str, int] = {}
        lasts: dict[str, int] = {}
        find, rfind = path.find, path.rfind
        for position, head, segments, tail, before_last in found:
            if position >= before:
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
            # What wildcard_matches() does, inline: this loop runs for every candidate.
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
                    return position
        return -1
