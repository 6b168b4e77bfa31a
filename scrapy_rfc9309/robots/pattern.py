"""Path normalisation and linear-time path-pattern matching (RFC 9309 §2.2.2-2.2.3).

Both a rule's pattern and the URL's path + query are brought to one canonical
form before comparing:

* non-ASCII characters (and stray non-UTF-8 octets) are percent-encoded as
  UTF-8 with upper-case hex digits;
* ``%XX`` of an unreserved character (``A-Z a-z 0-9 - . _ ~``) is decoded;
* other ``%XX`` escapes are kept, with upper-case hex (``%2f`` -> ``%2F``,
  which stays different from ``/``);
* ``%2A`` and ``%24`` are decoded to ``*`` and ``$`` so that a rule can name a
  literal ``*`` or ``$`` (§2.2.3); the pattern's own wildcards were split off
  before decoding, so a decoded ``*`` is never a wildcard;
* ASCII characters that may not appear in a URI (space, ``"``, ``<``, ...) and
  a ``%`` that starts no escape are percent-encoded.

Matching never uses regular expressions: a pattern is split on ``*`` into
literal segments found left to right with ``str.find`` (the leftmost match of
each segment leaves the most room for the rest, so no backtracking is ever
needed).  Time is linear in pattern + path length for any input, including
adversarial ones such as ``/*a*a*a*a*a*b$``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_DECODED_SPECIALS = {"2A": "*", "24": "$"}
_URI_CHARS = r"A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;="

#: Anything that is not already canonical: a "%" or a character that is not a
#: URI character.  Most real paths and patterns have none, and skip all work.
_NEEDS_WORK = re.compile(rf"[^{_URI_CHARS}]")
_TOKEN = re.compile(rf"%([0-9A-Fa-f]{{2}})|%|[^{_URI_CHARS}%]+")


def _escape_octets(text: str) -> str:
    try:
        # Undo the lexer's surrogate escapes: the original octet is encoded.
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that came in as str
        raw = text.encode("utf-8", "surrogatepass")
    return "".join(f"%{octet:02X}" for octet in raw)


def _canonical_token(match: re.Match[str]) -> str:
    hex_digits = match.group(1)
    if hex_digits is None:
        return _escape_octets(match.group(0))
    hex_digits = hex_digits.upper()
    char = chr(int(hex_digits, 16))
    if char in _UNRESERVED:
        return char
    return _DECODED_SPECIALS.get(hex_digits, "%" + hex_digits)


def canonical(text: str) -> str:
    """Return *text* (a path, path + query, or a pattern's literal part) in canonical form."""
    if _NEEDS_WORK.search(text) is None:
        return text
    return _TOKEN.sub(_canonical_token, text)


def _find_all_in_order(path: str, start: int, segments: tuple[str, ...]) -> int:
    """Find *segments* left to right from *start*; return the end position or -1."""
    pos = start
    for segment in segments:
        found = path.find(segment, pos)
        if found < 0:
            return -1
        pos = found + len(segment)
    return pos


class Pattern:
    """A compiled ``Allow``/``Disallow`` path pattern.

    ``length`` is the pattern's length in octets in canonical form: the measure
    of specificity for the longest-match rule (RFC 9309 §2.2.2).
    ``first_literal`` is the literal text the pattern must start with.
    """

    __slots__ = ("text", "length", "first_literal", "kind", "matches")

    PREFIX = 0  # no wildcard, no anchor: path.startswith(first_literal)
    EXACT = 1  # no wildcard, "$" anchor: path == first_literal
    WILDCARD = 2  # anything else: self.matches(path)

    text: str
    length: int
    first_literal: str
    kind: int
    matches: Callable[[str], bool]

    def __init__(self, raw: str) -> None:
        # "$" is an anchor only as the last character (§2.2.3); elsewhere a literal.
        anchored = raw.endswith("$")
        body = raw[:-1] if anchored else raw
        pieces = [canonical(piece) for piece in body.split("*")]
        self.text = "*".join(pieces) + ("$" if anchored else "")
        self.length = len(self.text)
        self.first_literal = pieces[0]
        if len(pieces) == 1:
            self.kind = self.EXACT if anchored else self.PREFIX
            literal = pieces[0]
            self.matches = literal.__eq__ if anchored else _prefix_matcher(literal)
            return
        self.kind = self.WILDCARD
        first, *middle, last = pieces
        middle_segments = tuple(piece for piece in middle if piece)
        self.matches = _wildcard_matcher(first, middle_segments, last, anchored)

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


def _prefix_matcher(prefix: str) -> Callable[[str], bool]:
    def matches(path: str) -> bool:
        return path.startswith(prefix)

    return matches


def _wildcard_matcher(
    first: str, middle: tuple[str, ...], last: str, anchored: bool
) -> Callable[[str], bool]:
    start = len(first)
    tail = len(last)

    def matches(path: str) -> bool:
        if not path.startswith(first):
            return False
        pos = _find_all_in_order(path, start, middle)
        if pos < 0:
            return False
        if anchored:
            # The last segment must sit at the very end, after everything else.
            return len(path) - tail >= pos and path.endswith(last)
        return path.find(last, pos) >= 0

    return matches
