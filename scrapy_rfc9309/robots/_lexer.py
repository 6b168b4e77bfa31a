"""The lexical side of robots.txt (RFC 9309 §2.2): the directive names, truncation,
decoding and line splitting.  ``RobotsTxt.parse`` reads the records of the lines
itself, inline (a reference lexer in the tests holds it to the grammar).
"""

from __future__ import annotations

from collections.abc import Iterator

#: RFC 9309 §2.5: a crawler must parse at least the first 500 KiB.
DEFAULT_MAX_BYTES = 512_000

USER_AGENT = "user-agent"
ALLOW = "allow"
DISALLOW = "disallow"
SITEMAP = "sitemap"
CRAWL_DELAY = "crawl-delay"
REQUEST_RATE = "request-rate"
CONTENT_USAGE = "content-usage"
CONTENT_SIGNAL = "content-signal"
UNKNOWN = "unknown"

#: Directive names as RFC 9309 (and the de-facto Crawl-delay, Request-rate and
#: Sitemap extensions, §2.2.4) spell them.
STANDARD_KEYS: dict[str, str] = {
    "user-agent": USER_AGENT,
    "allow": ALLOW,
    "disallow": DISALLOW,
    "sitemap": SITEMAP,
    "crawl-delay": CRAWL_DELAY,
    "request-rate": REQUEST_RATE,
    "content-usage": CONTENT_USAGE,
    "content-signal": CONTENT_SIGNAL,
}

#: LENIENT (not RFC 9309): misspellings that Google's parser accepts
#: (google/robotstxt robots.cc, ``kAllowFrequentTypos``), plus the obvious
#: spellings of the extension records.  Data, not ifs.
TYPO_KEYS: dict[str, str] = {
    "useragent": USER_AGENT,
    "user agent": USER_AGENT,
    "dissallow": DISALLOW,
    "dissalow": DISALLOW,
    "disalow": DISALLOW,
    "diasllow": DISALLOW,
    "disallaw": DISALLOW,
    "site-map": SITEMAP,
    "crawldelay": CRAWL_DELAY,
    "crawl delay": CRAWL_DELAY,
    "requestrate": REQUEST_RATE,
}

LENIENT_KEYS = {**STANDARD_KEYS, **TYPO_KEYS}
_UTF8_BOM = b"\xef\xbb\xbf"
#: What RFC 9309 §2.2 strips around keys and values (``WHITESPACE``, no Unicode).
WHITESPACE = " \t\v\f"


def truncate(body: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[bytes, bool]:
    """Return the part of *body* to parse and whether anything was cut.

    Content beyond *max_bytes* is ignored; the cut is made at the last line end
    within the limit so that no line is parsed half (RFC 9309 §2.5).
    """
    if len(body) <= max_bytes:
        return body, False
    head = body[:max_bytes]
    if body[max_bytes : max_bytes + 1] in (b"\n", b"\r"):
        return head, True
    end = max(head.rfind(b"\n"), head.rfind(b"\r"))
    return head[: end + 1], True


def decode(body: bytes | str) -> str:
    """Decode a body as UTF-8 (RFC 9309 §2.3), skipping a byte order mark.

    Invalid UTF-8 never raises: stray bytes are kept as surrogate escapes so that
    the pattern compiler can percent-encode the original octet.
    """
    if isinstance(body, str):
        return body[1:] if body.startswith("\ufeff") else body
    if body.startswith(_UTF8_BOM):
        body = body[len(_UTF8_BOM) :]
    return body.decode("utf-8", "surrogateescape")


#: The characters of text :func:`line_chunks` splits into lines at once.
LINE_CHUNK = 65_536


def line_chunks(text: str) -> Iterator[list[str]]:
    """The lines of *text* (see :func:`split_lines`), about :data:`LINE_CHUNK`
    characters of them at a time: a 500 KiB file's 30,000 line strings would
    otherwise all be alive at once beside the rules made of them (1.6 MiB of a
    parse's 5.8 MiB peak)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    start = 0
    while len(text) - start > LINE_CHUNK:
        cut = text.find("\n", start + LINE_CHUNK)
        if cut < 0:
            break
        yield text[start:cut].split("\n")
        start = cut + 1
    yield text[start:].split("\n")


def split_lines(text: str) -> list[str]:
    """Split on LF, CR or CRLF only (RFC 9309 §2.2, ``NL``).

    ``str.splitlines`` would also split on form feeds, NEL and Unicode
    separators, which are ordinary characters in a robots.txt.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")
