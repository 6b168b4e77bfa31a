"""What a site says about the use of its content, beyond allow/disallow.

Two kinds of robots.txt group member carry it (both neither start nor end a group,
RFC 9309 §2.2.4, and never change an allow/disallow verdict):

* ``Content-Usage: /path/ train-ai=n`` (IETF AIPREF, draft-ietf-aipref-attach-05):
  a path, then a usage preference (draft-ietf-aipref-vocab-08: an RFC 9651
  dictionary of categories to ``y``/``n``).  The lines whose path matches a URL
  with the longest pattern decide (the Allow/Disallow rule, §2.2.2); lines with the
  same path are combined per category, the most restrictive winning (vocab §5.1).
  Preferences apply only where the crawler may go.  A line without a path (as
  earlier drafts wrote it) applies to ``/``.
* ``Content-Signal: search=yes, ai-train=no`` (Cloudflare's Content Signals
  Policy): the same model with ``yes``/``no``, an optional path the same way.

The same dictionary in a ``Content-Usage`` response header applies to that response.
Unknown categories and values are kept as written; a line that is not a dictionary
is reported as ignored.  Pure Python: dictionaries are parsed with ``http-sf``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ._pattern import Pattern, compile_pattern

#: The robots.txt record names, as the lexer reports them.
CONTENT_USAGE = "content-usage"
CONTENT_SIGNAL = "content-signal"
#: The "refuse" value of each kind.
REFUSED = {CONTENT_USAGE: "n", CONTENT_SIGNAL: "no"}
ALLOWED_VALUE = {CONTENT_USAGE: "y", CONTENT_SIGNAL: "yes"}
#: How each kind is written, for evidence lines.
LABEL = {CONTENT_USAGE: "Content-Usage", CONTENT_SIGNAL: "Content-Signal"}


#: One use, named once: the category that means it in each vocabulary, ``None``
#: where a vocabulary has none.  IETF AIPREF (draft-ietf-aipref-vocab-08, written in
#: ``Content-Usage`` lines and headers, ``y``/``n``) and Cloudflare's Content Signals
#: Policy (``Content-Signal`` lines, ``yes``/``no``).  ``ai-input`` (content given to
#: a model to answer with) and AIPREF's ``ai-use`` (any use by an AI system) are not
#: the same use, and are kept apart; Content Signals' ``use=`` takes levels
#: (``immediate``, ``reference``, ``full``), not yes/no, and names no use here.
USES: dict[str, tuple[str | None, str | None]] = {
    "train-ai": ("train-ai", "ai-train"),
    "search": ("search", "search"),
    "ai-use": ("ai-use", None),
    "ai-input": (None, "ai-input"),
}
#: Every name a user may give a use by: each vocabulary's category names it.
USE_NAMES: dict[str, str] = {
    name: use for use, names in USES.items() for name in (use, *names) if name is not None
}


def categories_of(use: str) -> tuple[str | None, str | None]:
    """The (``Content-Usage``, ``Content-Signal``) categories meaning *use*, named in
    either vocabulary; an unknown name is taken as the category of that name in both."""
    known = USE_NAMES.get(use)
    return USES[known] if known is not None else (use, use)


def parse_preference(value: bytes | str) -> dict[str, str] | None:
    """The categories of a usage preference and their values (token values only,
    as written; other value types leave a category unknown), or ``None`` when the
    value is not an RFC 9651 dictionary."""
    # Imported at the first preference met: most crawls meet none (0.5 MiB).
    import http_sf
    from http_sf.types import Token

    data = value.encode("utf-8", "replace") if isinstance(value, str) else value
    try:
        parsed = http_sf.parse(data.strip(), tltype="dictionary")
    except Exception:  # http-sf raises its own error types, or ValueError
        return None
    if not isinstance(parsed, dict):
        return None
    found: dict[str, str] = {}
    for key, item in parsed.items():
        member = item[0] if isinstance(item, tuple) else None  # (value, parameters)
        if isinstance(member, Token):
            found[key] = str(member)
    return found


@dataclass(frozen=True, slots=True)
class PreferenceLine:
    """One ``Content-Usage`` or ``Content-Signal`` line of a group."""

    kind: str  # CONTENT_USAGE or CONTENT_SIGNAL
    path: str
    values: dict[str, str]
    line: int
    written: str  # the line's value as written, for evidence
    pattern: Pattern = field(compare=False, repr=False)  # path, compiled

    def __str__(self) -> str:
        return f"{LABEL[self.kind]}: {self.written}"


def preference_line(kind: str, value: str, line: int) -> PreferenceLine | None:
    """The member for a ``Content-Usage``/``Content-Signal`` *value*, or ``None`` if
    it cannot be used."""
    path, preference = "/", value
    if value.startswith("/"):
        path, _, preference = value.partition(" ")
        if "\t" in path:
            path, _, rest = path.partition("\t")
            preference = f"{rest} {preference}"
    values = parse_preference(preference)
    if values is None:
        return None
    return PreferenceLine(kind, path, values, line, value, compile_pattern(path))


@dataclass(frozen=True, slots=True)
class Preferences:
    """The preferences that apply to one URL for one crawler.

    ``usage`` holds the ``Content-Usage`` categories (``{"train-ai": "n"}``),
    ``signals`` the ``Content-Signal`` ones (``{"ai-train": "no"}``); ``lines`` the
    deciding lines as written, with their numbers (empty when nothing applies).
    """

    usage: dict[str, str]
    signals: dict[str, str]
    lines: tuple[tuple[int, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.usage or self.signals)

    def refused(self, uses: Iterable[str]) -> str | None:
        """The first of *uses* this refuses: each named in either vocabulary, and
        refused by its category in either (see :data:`USES`)."""
        for use in uses:
            usage, signal = categories_of(use)
            if usage is not None and self.usage.get(usage) == REFUSED[CONTENT_USAGE]:
                return use
            if signal is not None and self.signals.get(signal) == REFUSED[CONTENT_SIGNAL]:
                return use
        return None

    def with_header(self, header: dict[str, str]) -> Preferences:
        """These preferences with a response's ``Content-Usage`` header applied: its
        categories win over robots.txt's for that response."""
        return Preferences({**self.usage, **header}, self.signals, self.lines)

    def as_meta(self) -> dict[str, object]:
        """A plain dictionary for ``Request.meta``."""
        return {
            "content-usage": dict(self.usage),
            "content-signal": dict(self.signals),
            "lines": [f"line {number}: {text}" for number, text in self.lines],
        }


NO_PREFERENCES = Preferences({}, {})


def combine(kind: str, found: list[dict[str, str]]) -> dict[str, str]:
    """Per category, the most restrictive value of *found*: a refusal wins, then an
    allowance, then the first other value (vocab §5.1)."""
    combined: dict[str, str] = {}
    refused, allowed = REFUSED[kind], ALLOWED_VALUE[kind]
    for values in found:
        for category, value in values.items():
            current = combined.get(category)
            if current is None or value == refused or (value == allowed and current != refused):
                combined[category] = value
    return combined


def applicable(members: Iterable[PreferenceLine], path: str) -> Preferences:
    """The preferences *members* give *path* (a canonical path + query)."""
    best: dict[str, tuple[int, list[PreferenceLine]]] = {}
    for member in members:
        pattern = member.pattern
        if not pattern.matches(path):
            continue
        length, chosen = best.get(member.kind, (-1, []))
        if pattern.length > length:
            best[member.kind] = (pattern.length, [member])
        elif pattern.length == length:
            chosen.append(member)
    if not best:
        return NO_PREFERENCES
    deciding = [member for _, chosen in best.values() for member in chosen]
    return Preferences(
        combine(CONTENT_USAGE, [m.values for m in deciding if m.kind == CONTENT_USAGE]),
        combine(CONTENT_SIGNAL, [m.values for m in deciding if m.kind == CONTENT_SIGNAL]),
        tuple(sorted((m.line, str(m)) for m in deciding)),
    )
