"""What a robots.txt fetch result means, and for how long (RFC 9309 §2.3.1, §2.4).

| fetch result                            | outcome     | the crawler does                      |
|-----------------------------------------|-------------|---------------------------------------|
| 2xx                                     | SUCCESS     | parse the body and obey it            |
| 3xx                                     | REDIRECT    | follow (the caller counts the hops)   |
| 4xx except 429, too many redirects      | UNAVAILABLE | allow everything                      |
| 429, 5xx, other status, network error   | UNREACHABLE | the last good copy if there is one,   |
|                                         |             | else disallow (or allow) everything   |
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

from ._model import ALLOWED, Verdict
from ._robotstxt import RobotsTxt

#: RFC 9309 §2.4: a cached robots.txt should not be used for more than 24 hours.
MAX_CACHE_TTL = 86400.0


class FetchOutcome(str, Enum):
    SUCCESS = "success"
    REDIRECT = "redirect"
    UNAVAILABLE = "unavailable"
    UNREACHABLE = "unreachable"


def outcome_for_status(status: int) -> FetchOutcome:
    """Classify an HTTP status of a robots.txt response."""
    if 200 <= status < 300:
        return FetchOutcome.SUCCESS
    if 300 <= status < 400:
        return FetchOutcome.REDIRECT
    if 400 <= status < 500 and status != 429:
        return FetchOutcome.UNAVAILABLE
    return FetchOutcome.UNREACHABLE


#: An entry without its file (the dataclass and its fields), in bytes.
_ENTRY_BYTES = 400


@dataclass(frozen=True, slots=True)
class RobotsEntry:
    """The cached result of fetching one authority's robots.txt."""

    outcome: FetchOutcome
    #: The file that is obeyed: the fetched one, or while unreachable the last good copy.
    robots: RobotsTxt | None
    fetched_at: float
    expires_at: float
    #: What to answer when there is no file to obey.
    fallback: Verdict = ALLOWED
    status: int | None = None
    #: Why the fetch ended without a status to show (a failed redirect), in words.
    reason: str | None = None
    #: When an earlier crawl fetched the copy this entry was read from (seconds since
    #: the epoch); ``None`` when this crawl fetched it.
    kept_since: float | None = None

    @property
    def stale(self) -> bool:
        """True when an earlier copy is obeyed because the site is unreachable now."""
        return self.outcome is FetchOutcome.UNREACHABLE and self.robots is not None

    @property
    def refuses_all(self) -> bool:
        """True when every request is refused: there is no file to obey, and the
        fallback disallows (an unreachable robots.txt, RFC 9309 §2.3.1.4)."""
        return self.robots is None and not self.fallback.allowed

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def check(self, url: str, user_agent: str) -> Verdict:
        if self.robots is None:
            return self.fallback
        return self.robots.check(url, user_agent)

    def delay(self, user_agent: str) -> float | None:
        """The file's Crawl-delay / Request-rate interval for *user_agent*, if any."""
        return self.robots.delay(user_agent) if self.robots is not None else None

    def memory_estimate(self, user_agent: str) -> int:
        """An estimate of the bytes this entry holds once *user_agent* checked URLs
        against it (see :meth:`RobotsTxt.memory_estimate`)."""
        if self.robots is None:
            return _ENTRY_BYTES
        return _ENTRY_BYTES + self.robots.memory_estimate(user_agent)

    def describe(self) -> str:
        """A short human description, for logs and the explain command."""
        if self.reason is not None:
            what = self.reason
        else:
            what = f"HTTP {self.status}" if self.status is not None else "network error"
        if self.kept_since is not None:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.kept_since))
            what = f"{what}, kept from the fetch at {when}"
        if self.outcome is FetchOutcome.SUCCESS:
            return f"robots.txt {'kept' if self.kept_since is not None else 'fetched'} ({what})"
        if self.outcome is FetchOutcome.UNAVAILABLE:
            return f"robots.txt unavailable ({what}): everything allowed"
        if self.stale:
            return f"robots.txt unreachable ({what}): obeying the last good copy"
        verb = "allowed" if self.fallback.allowed else "disallowed"
        return f"robots.txt unreachable ({what}): everything {verb}"


#: Verdict for every URL of an unreachable site without a usable copy.
UNREACHABLE_DISALLOWED = Verdict(False, "robots.txt unreachable")


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Turns fetch results into cache entries.

    ``unreachable_allows`` is the fail-open choice (``RFC9309_UNREACHABLE = "allow"``);
    RFC 9309 §2.3.1 requires the default, disallow.
    """

    cache_ttl: float = 3600.0
    failure_ttl: float = 600.0
    unreachable_allows: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.cache_ttl <= MAX_CACHE_TTL:
            raise ValueError(f"cache_ttl must be between 0 and {MAX_CACHE_TTL:g} seconds")
        if self.failure_ttl < 0:
            raise ValueError("failure_ttl must not be negative")

    def success(self, robots: RobotsTxt, now: float, status: int | None = 200) -> RobotsEntry:
        return RobotsEntry(FetchOutcome.SUCCESS, robots, now, now + self.cache_ttl, status=status)

    def unavailable(
        self, now: float, status: int | None = None, reason: str | None = None
    ) -> RobotsEntry:
        # A definite answer ("there is no robots.txt"): cached as long as a file.
        return RobotsEntry(
            FetchOutcome.UNAVAILABLE,
            None,
            now,
            now + self.cache_ttl,
            status=status,
            reason=reason,
        )

    def unreachable(
        self, now: float, previous: RobotsEntry | None = None, status: int | None = None
    ) -> RobotsEntry:
        # §2.4 allows a stale copy while the file is unreachable.
        copy = previous.robots if previous is not None else None
        fallback = ALLOWED if self.unreachable_allows else UNREACHABLE_DISALLOWED
        return RobotsEntry(
            FetchOutcome.UNREACHABLE,
            copy,
            now,
            now + self.failure_ttl,
            fallback=fallback,
            status=status,
        )

    def for_status(
        self,
        status: int,
        now: float,
        robots: RobotsTxt | None = None,
        previous: RobotsEntry | None = None,
    ) -> RobotsEntry:
        """The entry for a final (non-redirect) response.  *robots* is the parsed body,
        needed only for a 2xx."""
        outcome = outcome_for_status(status)
        if outcome is FetchOutcome.SUCCESS:
            return self.success(robots if robots is not None else RobotsTxt([], []), now, status)
        if outcome is FetchOutcome.UNAVAILABLE:
            return self.unavailable(now, status)
        if outcome is FetchOutcome.REDIRECT:
            raise ValueError("a redirect is not a final robots.txt response")
        return self.unreachable(now, previous, status)
