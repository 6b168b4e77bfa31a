"""One robots.txt fetch, step by step (RFC 9309 §2.3.1): which URL to request next,
and what the final result means.  Pure: the caller does the I/O.

    plan = FetchPlan("https://example.com", policy, max_redirects=5, timeout=10, now=t0)
    while True:
        ... request plan.url with a timeout of plan.time_left(now) ...
        network error  -> entry = plan.unreachable(now)
        3xx            -> entry = plan.redirect(absolute_location, now); None: go on
        other status   -> entry = plan.response(status, parsed_body, now)

A hostile site meets three guards here: only ``http``/``https`` redirect targets are
followed (a ``file:`` or ``ftp:`` target ends the fetch as a failed redirect), at most
*max_redirects* hops, and one deadline for the whole fetch, redirects included.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

from ._access import AccessPolicy, FetchOutcome, RobotsEntry, outcome_for_status
from ._robotstxt import RobotsTxt

#: The only schemes a robots.txt is fetched over.
FETCHABLE_SCHEMES = frozenset({"http", "https"})

#: Why a redirect chain ended without a file (each means "unavailable", §2.3.1.2).
REDIRECT_LIMIT = "redirect_limit"
REDIRECT_LOOP = "redirect_loop"
REDIRECT_NO_LOCATION = "redirect_no_location"
REDIRECT_SCHEME = "redirect_scheme"
#: Each of them in words, for the close report and ``scrapy robots``.
_REDIRECT_REASONS = {
    REDIRECT_LIMIT: "too many redirects",
    REDIRECT_LOOP: "redirect loop",
    REDIRECT_NO_LOCATION: "redirect without a Location",
    REDIRECT_SCHEME: "redirect to a URL that is not http(s)",
}


class FetchPlan:
    """The state of one fetch of ``{authority}/robots.txt``.

    ``url`` is the URL to request now; ``hops`` counts the redirects followed;
    ``failed_redirect`` names why a redirect chain ended (one of the
    ``REDIRECT_*`` constants), else ``None``.
    """

    def __init__(
        self,
        authority: str,
        policy: AccessPolicy,
        *,
        max_redirects: int,
        timeout: float,
        now: float,
        previous: RobotsEntry | None = None,
    ) -> None:
        self.url = f"{authority}/robots.txt"
        self.hops = 0
        self.failed_redirect: str | None = None
        self._policy = policy
        self._max_redirects = max_redirects
        self._timeout = timeout
        self._deadline = now + timeout
        self._previous = previous
        self._seen = {self.url}

    def time_left(self, now: float) -> float:
        """Seconds left for the whole fetch; ``<= 0`` means give up (unreachable)."""
        return self._deadline - now

    def go_on(self, now: float) -> None:
        """The fetch goes on at *now* after a pause (its next request was put off
        while the site asked not to be contacted yet): its time starts again."""
        self._deadline = now + self._timeout

    def redirect(self, location: str | None, now: float) -> RobotsEntry | None:
        """A 3xx answered ``url``.  Returns ``None`` when ``url`` now names the next
        hop, else the entry that ends the fetch (unavailable: everything allowed)."""
        if not location:
            return self._failed_redirect(REDIRECT_NO_LOCATION, now)
        target = urljoin(self.url, location)
        if urlsplit(target).scheme.lower() not in FETCHABLE_SCHEMES:
            return self._failed_redirect(REDIRECT_SCHEME, now)
        if target in self._seen:
            return self._failed_redirect(REDIRECT_LOOP, now)
        if self.hops >= self._max_redirects:
            return self._failed_redirect(REDIRECT_LIMIT, now)
        self._seen.add(target)
        self.hops += 1
        self.url = target
        return None

    def response(self, status: int, robots: RobotsTxt | None, now: float) -> RobotsEntry:
        """The entry for a final (non-3xx) response; *robots* is the parsed body of a 2xx."""
        return self._policy.for_status(status, now, robots, self._previous)

    def unreachable(self, now: float) -> RobotsEntry:
        """The entry after a network error or the deadline (§2.3.1.4)."""
        return self._policy.unreachable(now, self._previous)

    def _failed_redirect(self, reason: str, now: float) -> RobotsEntry:
        self.failed_redirect = reason
        return self._policy.unavailable(now, reason=_REDIRECT_REASONS[reason])


def is_redirect(status: int) -> bool:
    return outcome_for_status(status) is FetchOutcome.REDIRECT
