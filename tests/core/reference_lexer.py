"""The reference lexer: a robots.txt body as a stream of records, one per line, and
the model built from them, written plainly.  ``RobotsTxt.parse`` does both inline,
for speed; the property tests hold the two equal."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from scrapy_rfc9309.robots import RobotsTxt
from scrapy_rfc9309.robots import _lexer as lexer
from scrapy_rfc9309.robots._builder import Builder
from scrapy_rfc9309.robots._lexer import (
    LENIENT_KEYS,
    STANDARD_KEYS,
    TYPO_KEYS,
    UNKNOWN,
    WHITESPACE,
    decode,
    split_lines,
)
from scrapy_rfc9309.robots._useragent import product_token


class Record(NamedTuple):
    """One ``key: value`` line of a robots.txt file.

    ``directive`` is one of the module's directive constants (``UNKNOWN`` for a
    key it does not know); ``key`` is the key as written, lower-cased;
    ``lenient`` is true when the line was only understood thanks to lenient
    parsing (a typo in the key or a missing colon).
    """

    line: int
    directive: str
    key: str
    value: str
    lenient: bool = False


def records(body: bytes | str, *, lenient: bool = True) -> Iterator[Record]:
    """Yield the records of *body* in file order, skipping blank and comment lines.

    The caller truncates (see :func:`truncate`); this function reads all it is given.
    """
    keys = LENIENT_KEYS if lenient else STANDARD_KEYS
    for number, line in enumerate(split_lines(decode(body)), 1):
        hash_at = line.find("#")
        if hash_at >= 0:
            line = line[:hash_at]
        key, colon, value = line.partition(":")
        if not colon:
            line = line.strip(WHITESPACE)
            if not line or not lenient:
                continue
            # LENIENT (not RFC 9309): Google accepts whitespace instead of the
            # colon when the line is exactly two words ("Disallow /x").
            words = line.split()
            if len(words) != 2:
                continue
            key, value = words
        key = key.strip(WHITESPACE).lower()
        if not key:
            continue
        directive = keys.get(key, UNKNOWN)
        lenient_only = directive is not UNKNOWN and (not colon or key in TYPO_KEYS)
        yield Record(number, directive, key, value.strip(WHITESPACE), lenient_only)


def from_records(records: Iterable[Record], *, truncated: bool = False) -> RobotsTxt:
    """The model of a record stream."""
    builder = Builder()
    for line, directive, _key, value, lenient in records:
        builder.lenient_lines += lenient
        if directive in (lexer.DISALLOW, lexer.ALLOW):
            if builder.current is not None:  # else before any user-agent line: no group
                builder.in_rules = True
                if value:  # an empty pattern is no rule
                    builder.current.add_rule(directive == lexer.ALLOW, value, line)
        elif directive == lexer.USER_AGENT:
            if builder.current is None or builder.in_rules:
                builder.start_group(line)
            assert builder.current is not None
            star = value == "*" or (value.startswith("*") and value[1:2].isspace())
            agent = "*" if star else product_token(value)
            if agent and agent not in builder.current.agents:
                builder.current.agents.append(agent)
        else:
            builder.other(directive, line, value)
    return RobotsTxt.of(builder, truncated=truncated)
