"""Page-level robots directives: the ``X-Robots-Tag`` response header and
``<meta name="robots">`` tags (``noindex``, ``nofollow``, ``none``, ``noai``, ...).

A header value may name the crawler it is for (``X-Robots-Tag: otherbot: noindex``);
a meta tag's name is ``robots`` (every crawler) or a crawler's name.  Names are
compared as product tokens (see :mod:`._useragent`).  Meta tags are read in the
document's head only (:func:`html_head`), where HTML puts them: a page costs what its
head does, whatever its length.  Pure Python.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ._useragent import product_token

#: Directives whose value itself holds a colon: never a crawler's name.
_WITH_VALUES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


#: Where an HTML document's head ends, in any letter case: its end tag, or the body's
#: start tag (both may be left out).
_HEAD_END = re.compile(rb"</head\b|<body\b", re.IGNORECASE)


def html_head(body: bytes) -> bytes:
    """The head of the HTML document *body*: up to its ``</head>`` (or ``<body>``);
    the whole document if it has neither."""
    end = body.find(b"</head")  # as most pages write it: a plain search, the fastest
    if end < 0:
        found = _HEAD_END.search(body)
        end = found.start() if found is not None else len(body)
    return body[:end]


def _split(text: str) -> set[str]:
    found = {part.strip().lower() for part in text.split(",")}
    found.discard("")
    if "none" in found:
        found |= {"noindex", "nofollow"}
    return found


def page_directives(
    headers: Iterable[str], metas: Iterable[tuple[str, str]], token: str
) -> set[str]:
    """The directives that apply to the crawler *token* (a product token), from the
    ``X-Robots-Tag`` header values and the ``(name, content)`` of the page's meta tags.
    ``none`` also gives ``noindex`` and ``nofollow``."""
    found: set[str] = set()
    for value in headers:
        head, colon, rest = value.partition(":")
        name = head.strip().lower()
        if colon and name not in _WITH_VALUES and " " not in name and "," not in name:
            if product_token(name) == token:
                found |= _split(rest)
            continue
        found |= _split(value)
    for name, content in metas:
        name = name.strip().lower()
        if name == "robots" or product_token(name) == token:
            found |= _split(content)
    return found
