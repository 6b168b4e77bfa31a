"""Product tokens (RFC 9309 §2.2.1)."""

from __future__ import annotations

import re

#: A product token as RFC 9309 §2.2.1 defines it.
_RFC_TOKEN = re.compile(r"[A-Za-z_-]+")
#: The product name a User-Agent string or a ``User-agent:`` value starts with: up to
#: the version (``/1.0``) or a comment (`` (+http://...)``).
_NAME = re.compile(r"[^\s/]*")


def product_token(user_agent: str) -> str:
    """Return the product name a user-agent string starts with, lower-cased.

    ``"MyBot/1.0 (+http://x)"`` -> ``"mybot"``; ``"FooBot"`` -> ``"foobot"``;
    ``"AI2Bot-Dolma"`` -> ``"ai2bot-dolma"``.

    The name is taken whole, up to its version or comment, on both sides of the
    comparison (the crawler's own name and each ``User-agent`` line of a file), and
    names are compared whole: ``Foo`` never matches ``FooBot``, and ``Bot1`` never
    matches ``Bot2``.  RFC 9309 §2.2.1 allows only ``a-zA-Z_-`` in a product token;
    real crawlers have digits too (``AI2Bot``, ``MJ12bot``, ``360Spider``), and
    cutting names at the first other character (as Google's parser does with the
    file's lines) would make ``AI2Bot-Dolma``'s group ``AI2Bot``'s, and ``Bot1``'s
    ``Bot2``'s.  For a crawler whose token is valid, this is exactly the RFC's match.
    """
    match = _NAME.match(user_agent.strip())
    return match.group(0).lower() if match else ""


#: The name a file's ``User-agent:`` line gives: letters, digits, ``-`` and ``_``.
_GROUP_NAME = re.compile(r"[A-Za-z0-9_-]*")


def group_name(value: str) -> str:
    """Return the crawler name a file's ``User-agent:`` *value* gives, lower-cased:
    up to the first character that is not a letter, digit, ``-`` or ``_``.

    ``"Googlebot*"`` -> ``"googlebot"``, ``"bingbot/2.0"`` -> ``"bingbot"``,
    ``"AI2Bot-Dolma"`` -> ``"ai2bot-dolma"``.  Sites write such values (a trailing
    ``*``, a version), and Google's parser, Protego and robotspy all read the name
    before them; digits and hyphens stay inside the name, so that ``Bot1``'s group is
    never ``Bot2``'s, nor ``AI2Bot-Dolma``'s ``AI2Bot``'s (compared whole, see
    :func:`product_token`).
    """
    match = _GROUP_NAME.match(value.strip())
    return match.group(0).lower() if match else ""


def is_rfc_token(token: str) -> bool:
    """True if *token* is a product token RFC 9309 §2.2.1 allows (``[a-zA-Z_-]+``)."""
    return _RFC_TOKEN.fullmatch(token) is not None
