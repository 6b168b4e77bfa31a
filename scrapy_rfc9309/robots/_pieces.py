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
from functools import partial
from itertools import chain
from operator import itemgetter
from typing import Any

from ._pattern import shape

#: Keys are a piece's first characters, at most this many: the path's substrings of
#: each length up to it are what a check looks keys up in.
KEY_LENGTH = 8


#: An indexed rule: its decision key, head, segments, tail, the least length a
#: matching path has before its last segment or tail starts, and the rule.
_Entry = tuple[int, str, list[str], str, int, Any]


class PieceIndex:
    """Rules that need literal pieces found in the path, filed by their rarest piece.

    *rules* are ``(key, text, rule)``: the rule's decision key (smaller decides
    first), its pattern's text form (see :func:`._pattern.pattern_texts`), and what
    :meth:`first_match` returns for it.
    """

    __slots__ = ("_filed", "_key_lengths", "_keys")

    def __init__(self, rules: Sequence[tuple[int, str, Any]]) -> None:
        # Built for files of 25,000 rules at a crawler's first check: one loop with
        # no call it can do without, then C.  Texts, order and index of 25,000 rules
        # "/*<n>*ab": 53 ms, 107 when each rule was compiled to a Pattern first
        # (best of 10, the garbage collector paused).
        cut = itemgetter(slice(None, KEY_LENGTH))
        entries: list[_Entry] = []
        keys_of_rules: list[list[str]] = []
        for decision_key, text, rule in rules:
            anchored = text[-1] == "$"
            pieces = (text[:-1] if anchored else text).split("*")
            head, named = pieces[0], pieces[1:]
            if "" in named or "%2" in text:  # "**", a trailing "*", a literal "*" or "$"
                head, segments, tail = shape(text)
                named = [*segments, tail] if tail else segments
                before_last = len(head) + sum(map(len, named)) - len(named[-1])
            else:
                segments, tail = (named[:-1], named[-1]) if anchored else (named, "")
                # The pieces' length (the text's, less its "*"s and "$"), less the last's.
                before_last = len(text) - anchored - len(named) - len(named[-1])
            entries.append((decision_key, head, segments, tail, before_last, rule))
            keys = list(map(cut, named))
            if len(head) > 1:
                keys.append(head[1 : KEY_LENGTH + 1])
            keys_of_rules.append(keys)
        # How many rules name each key: a rule's rarest key rejects it, and the
        # fewest others, when it is absent from a path.
        rarity = Counter(chain.from_iterable(keys_of_rules)).__getitem__
        chosen = list(map(partial(min, key=rarity), keys_of_rules))
        # Under each key, its rules; one each, as in a hostile file, is made in C.
        filed: dict[str, Sequence[_Entry]] = dict(zip(chosen, zip(entries), strict=True))
        if len(filed) < len(entries):
            filed = {}
            for key, entry in zip(chosen, entries, strict=True):
                shared = filed.get(key)
                if shared is None:
                    filed[key] = [entry]
                else:
                    shared.append(entry)  # type: ignore[attr-defined]
        self._filed = filed
        self._keys = frozenset(filed)
        self._key_lengths = sorted(set(map(len, filed)))

    def first_match(self, path: str, grams: Callable[[int], set[str]], before: int) -> Any:
        """The first rule in decision order, with a key below *before*, that matches
        *path*; ``None`` if none does.  *grams(n)* is the set of the path's
        substrings of length *n*."""
        found: list[_Entry] = []
        rules_under = self._filed.__getitem__
        for length in self._key_lengths:
            if length <= len(path):
                found.extend(chain.from_iterable(map(rules_under, grams(length) & self._keys)))
        found.sort()  # in decision order: the keys differ
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
        for decision_key, head, segments, tail, before_last, rule in found:
            if decision_key >= before:
                break
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
                    return rule
        return None
