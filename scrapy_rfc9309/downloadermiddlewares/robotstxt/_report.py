"""The robots middleware's close report: per site, what its robots.txt fetch gave,
how many requests it dropped, by which rules, the delay it asked for, and the
usage preferences (Content-Usage, Content-Signal lines) its requests carried.

Only sites that dropped a request, could not be fetched or stated preferences are
kept, and the report names the top :data:`TOP_SITES` of them (the rest summed), so
that a broad crawl's report stays a few lines long.  The first :data:`MAX_SITES` such
sites are told apart; the requests later ones drop are summed, so that the report
costs a broad crawl no memory for each of its sites.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: How many sites the report names; the others are summed in one line.
TOP_SITES = 10
#: How many deciding rules a log line names per site (the stat keeps them all).
TOP_RULES = 3
#: How many sites the report keeps apart (about 520 bytes each, measured with
#: tracemalloc for sites of one rule and no preferences).
MAX_SITES = 10_000


@dataclass
class _Site:
    outcome: str
    delay: float | None = None
    dropped: Counter[tuple[str, int | None]] = field(default_factory=Counter)
    preferences: Counter[str] = field(default_factory=Counter)  # line -> requests


class RobotsReport:
    def __init__(self) -> None:
        self._sites: dict[str, _Site] = {}
        self._untold = 0  # requests dropped by sites past the first MAX_SITES

    def _site(self, authority: str, outcome: str) -> _Site | None:
        """*authority*'s record, its outcome now *outcome*; None past MAX_SITES."""
        site = self._sites.get(authority)
        if site is None:
            if len(self._sites) >= MAX_SITES:
                return None
            site = self._sites[authority] = _Site(outcome)
        site.outcome = outcome
        return site

    def dropped(
        self, authority: str, outcome: str, rule: str | None, line: int | None, delay: float | None
    ) -> None:
        site = self._site(authority, outcome)
        if site is None:
            self._untold += 1
            return
        site.delay = delay
        site.dropped[(rule or "no rule", line)] += 1

    def preferences(self, authority: str, outcome: str, lines: list[str]) -> None:
        """A request to *authority* carried the preferences of *lines*."""
        site = self._site(authority, outcome)
        if site is not None:
            site.preferences.update(lines)

    def failed(self, authority: str, outcome: str) -> None:
        self._site(authority, outcome)

    def _ranked(self) -> list[tuple[str, _Site]]:
        return sorted(self._sites.items(), key=lambda item: -sum(item[1].dropped.values()))

    def summary(self) -> list[dict[str, Any]]:
        """The top sites, most dropped requests first, each with every rule that dropped
        a request and its count, as plain data (for the stats)."""
        return [
            {
                "site": authority,
                "robots_txt": site.outcome,
                "dropped": sum(site.dropped.values()),
                "rules": [
                    {"rule": rule, "line": line, "dropped": count}
                    for (rule, line), count in site.dropped.most_common()
                ],
                "crawl_delay": site.delay,
                "preferences": dict(site.preferences),
            }
            for authority, site in self._ranked()[:TOP_SITES]
        ]

    def lines(self) -> list[str]:
        """The report as log lines (empty when robots.txt dropped nothing and every
        fetch succeeded)."""
        lines = []
        for site in self.summary():
            rules = ", ".join(
                f"'{r['rule']}'"
                + (f" (line {r['line']})" if r["line"] else "")
                + f" x{r['dropped']}"
                for r in site["rules"][:TOP_RULES]
            )
            more = site["rules"][TOP_RULES:]
            if more:
                rules += f" and {len(more)} more rules x{sum(r['dropped'] for r in more)}"
            delay = f"; Crawl-delay {site['crawl_delay']:g} s" if site["crawl_delay"] else ""
            count = site["dropped"]
            dropped = f"{count} request{'s' if count != 1 else ''} dropped" + (
                f": {rules}" if rules else ""
            )
            stated = "; ".join(f"'{line}' x{n}" for line, n in site["preferences"].items())
            said = f"; preferences: {stated}" if stated else ""
            lines.append(f"{site['site']}: {site['robots_txt']}; {dropped}{delay}{said}")
        rest = self._ranked()[TOP_SITES:]
        if rest or self._untold:
            count = sum(sum(site.dropped.values()) for _, site in rest) + self._untold
            more = f"{len(rest)}+" if self._untold else str(len(rest))
            lines.append(f"... and {more} more sites: {count} requests dropped")
        return lines
