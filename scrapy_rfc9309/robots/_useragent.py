"""Product tokens (RFC 9309 §2.2.1)."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z_-]*")


def product_token(user_agent: str) -> str:
    """Return the product token a user-agent string starts with, lower-cased.

    ``"MyBot/1.0 (+http://x)"`` -> ``"mybot"``; ``"FooBot"`` -> ``"foobot"``.
    Only the characters RFC 9309 allows in a product token (``a-zA-Z_-``) are
    taken, so ``"Foo"`` is never a prefix match for ``"FooBot"``.
    """
    match = _TOKEN.match(user_agent.strip())
    return match.group(0).lower() if match else ""
