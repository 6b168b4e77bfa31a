"""Literal pieces looked up among a path's short substrings."""

from __future__ import annotations

#: A check whose candidate rules times the path's length exceeds this tests the
#: literal piece of each rule that can match anywhere against the path's short
#: substrings (a set lookup) instead of searching the whole path for each: 900
#: rules "/*<n>*zz" and a 2 KB URL of "a"s, a check takes 0.4 ms instead of 1.2.
HEAVY_WORK = 1_000_000
#: Substrings up to this long are kept in sets; a longer literal is looked up by
#: its first and last GRAM characters before the path is searched for it.
GRAM = 4


class PathGrams:
    """``contains(literal)`` answers ``literal in path``: once the path's substrings
    of a length are in a set, each answer is a set lookup.  One pass over the path
    makes the set of length GRAM; a shorter length's set is made from it (the
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
            if length < GRAM <= len(path):
                grams = {gram[:length] for gram in self.of_length(GRAM)}
                # Starts too close to the end for a GRAM-long substring.
                last = range(len(path) - GRAM + 1, len(path) - length + 1)
                grams.update(path[at : at + length] for at in last)
            else:
                grams = {path[at : at + length] for at in range(len(path) - length + 1)}
            self._by_length[length] = grams
        return grams

    def contains(self, literal: str) -> bool:
        if len(literal) <= GRAM:
            return literal in self.of_length(len(literal))
        ends = self.of_length(GRAM)
        if literal[:GRAM] not in ends or literal[-GRAM:] not in ends:
            return False
        return literal in self._path
