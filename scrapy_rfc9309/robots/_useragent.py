"""Product tokens (RFC 9309 §2.2.1)."""

from __future__ import annotations

import re

#: A product token as RFC 9309 §2.2.1 defines it.
_RFC_TOKEN = re.compile(r"[A-Za-z_-]+")
#: A crawler's name, in a User-Agent string and in a file's ``User-agent:`` value
#: alike: letters (any script's), digits, ``-`` and ``_``, up to the first other
#: character (a version's ``/``, a comment, a trailing ``*``).
_NAME = re.compile(r"[\w-]*")


def product_token(user_agent: str) -> str:
    """Return the crawler name *user_agent* (a User-Agent string, or a file's
    ``User-agent:`` value) starts with, lower-cased.

    ``"MyBot/1.0 (+http://x)"`` -> ``"mybot"``; ``"Googlebot*"`` -> ``"googlebot"``;
    ``"AI2Bot-Dolma"`` -> ``"ai2bot-dolma"``; ``"UnicödeBöt"`` -> ``"unicödeböt"``.

    One rule for both sides of the comparison (the crawler's own name and each
    ``User-agent`` line of a file), so that a name spelled the same on both sides
    always matches, and names are compared whole: ``Foo`` never matches ``FooBot``,
    and ``Bot1`` never matches ``Bot2``.  RFC 9309 §2.2.1 allows only ``a-zA-Z_-``
    in a product token; real crawlers have digits too (``AI2Bot``, ``MJ12bot``,
    ``360Spider``) and some letters outside ASCII, and cutting names at the first
    other character (as Google's parser does with the file's lines) would make
    ``AI2Bot-Dolma``'s group ``AI2Bot``'s, and ``Bot1``'s ``Bot2``'s.  Sites write
    values with a trailing ``*`` or a version, and Google's parser, Protego and
    robotspy all read the name before them.  For a crawler whose token is valid,
    this is exactly the RFC's match.
    """
    match = _NAME.match(user_agent.strip())
    return match.group(0).lower() if match else ""


def is_rfc_token(token: str) -> bool:
    """True if *token* is a product token RFC 9309 §2.2.1 allows (``[a-zA-Z_-]+``)."""
    return _RFC_TOKEN.fullmatch(token) is not None
