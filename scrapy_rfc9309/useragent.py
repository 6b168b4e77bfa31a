"""The crawler's product token for a request (RFC 9309 §2.2.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .robots import product_token

if TYPE_CHECKING:
    from scrapy import Request


def crawler_token(configured: str | None, request: Request, default_user_agent: str) -> str:
    """``ROBOTSTXT_USER_AGENT`` if set, else the product token of the ``User-Agent``
    header the request is sent with (``MyBot/1.0 (+http://x)`` -> ``mybot``)."""
    if configured:
        return product_token(configured)
    header = request.headers.get(b"User-Agent")
    user_agent = header.decode("latin-1") if header else default_user_agent
    return product_token(user_agent)
