"""The ``Retry-After`` header (RFC 9110 §10.2.3): ``delay-seconds`` or an HTTP-date."""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import mktime_tz, parsedate_tz

#: Longer than any cap worth setting (a thousand years, in seconds): a longer value,
#: or a digit string too long to convert, reads as this.
FOREVER = 3.2e10


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """A parsed ``Retry-After``: ``seconds`` to wait from now, or ``None`` with
    ``problem`` saying why the value cannot be used."""

    seconds: float | None
    problem: str | None = None


def parse_retry_after(value: bytes | str | None, now: float) -> RetryAfter | None:
    """Parse a ``Retry-After`` value received at *now* (seconds since the epoch, the
    clock an HTTP-date is read on).  ``None`` when there is no value; a value that
    cannot be used (garbage, negative, a date not in the future) gives ``seconds =
    None`` and a ``problem``.  A huge value is returned as is, up to
    :data:`FOREVER`: the caller caps it."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    text = value.strip()
    if not text:
        return RetryAfter(None, "empty")
    if text.isascii() and text.isdigit():
        # Python refuses to convert a few thousand digits; that many mean "forever".
        return RetryAfter(float(int(text)) if len(text) <= 11 else FOREVER)
    if text.startswith("-") and text[1:].isdigit():
        return RetryAfter(None, "negative")
    try:
        parts = parsedate_tz(text)
        if parts is not None and parts[9] is None:  # the asctime form: GMT (RFC 9110)
            parts = (*parts[:9], 0)
        when = float(mktime_tz(parts)) if parts is not None else None
    except (ValueError, OverflowError, IndexError, TypeError):
        when = None
    if when is None:
        return RetryAfter(None, "not a number of seconds nor an HTTP-date")
    if when <= now:
        return RetryAfter(None, "a date in the past")
    return RetryAfter(min(when - now, FOREVER))
