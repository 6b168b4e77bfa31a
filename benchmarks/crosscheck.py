"""Cross-check scrapy_rfc9309 against Google's parser and Protego on real robots.txt files.

Run from the repository root:  ``python benchmarks/crosscheck.py``

For every file of ``tests/data/robots-corpus`` and three crawlers (one no file names,
``Googlebot``, ``GPTBot``), every URL is checked by the three parsers: the URLs really
crawled on the host where the corpus has them, else URLs made from the file's own rules.
Each disagreement is printed with the reason this library decides as it does; a
disagreement no known reason explains is printed as UNEXPLAINED (and fails the test
``tests/core/test_crosscheck.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import robotstxt as google
from protego import Protego

from scrapy_rfc9309 import RobotsTxt
from scrapy_rfc9309.robots import _lexer as lexer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' reference lexer, run as a script too
from tests.core import reference_lexer  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "robots-corpus"
CRAWLERS = ("MyCrawler", "Googlebot", "GPTBot")


@dataclass(frozen=True)
class Disagreement:
    peer: str
    file: str
    crawler: str
    url: str
    ours: bool
    reason: str | None


def corpus_urls(name: str, robots: RobotsTxt) -> list[str]:
    crawled = CORPUS / "urls" / f"{name}.txt"
    if crawled.exists():
        return [url for url in crawled.read_text().split() if url]
    host = name.split("__", 1)[1]
    urls = [f"https://{host}/"]
    for group in robots.groups:
        for rule in group.rules:
            literal = rule.pattern.split("*")[0].rstrip("$")
            urls += [f"https://{host}{literal}", f"https://{host}{literal}x.html"]
    return urls


def split_groups_at_other_records(text: str) -> RobotsTxt:
    """Our parser, but a user-agent line after any other record starts a new group
    (what Protego does)."""

    def records() -> Iterator[reference_lexer.Record]:
        after_user_agent = False
        for record in reference_lexer.records(text):
            if record.directive == lexer.USER_AGENT:
                after_user_agent = True
            elif after_user_agent and record.directive not in (lexer.ALLOW, lexer.DISALLOW):
                yield record
                # An empty Disallow is no rule, but ends the run of user-agent lines.
                yield reference_lexer.Record(record.line, lexer.DISALLOW, "disallow", "")
                after_user_agent = False
                continue
            else:
                after_user_agent = False
            yield record

    return reference_lexer.from_records(records())


# Each reason: (label, does it explain this disagreement?).
Explainer = Callable[[str, RobotsTxt, str, str, bool], bool]


def _empty_query(text: str, ours: RobotsTxt, crawler: str, url: str, peer_allowed: bool) -> bool:
    return url.endswith("?") and ours.allowed(url[:-1], crawler) == peer_allowed


def _group_split(text: str, ours: RobotsTxt, crawler: str, url: str, peer_allowed: bool) -> bool:
    return split_groups_at_other_records(text).allowed(url, crawler) == peer_allowed


REASONS: dict[str, list[tuple[str, Explainer]]] = {
    "google": [
        (
            "empty query: the fast-robotstxt binding's URL parser drops a trailing '?', so "
            "'Disallow: /a?' stops matching '/a?'. RFC 9309 §2.2.2 matches the path and query "
            "as requested; RFC 3986 §6.2.3 keeps an empty query's delimiter.",
            _empty_query,
        )
    ],
    "protego": [
        (
            "group boundaries: Protego starts a new group at a user-agent line that follows a "
            "Crawl-delay (or other non-rule) line. RFC 9309 §2.1-2.2 (the group grammar): "
            "only a user-agent line after rules starts a new group, so the user-agent lines "
            "around a Crawl-delay share one group and its rules. Google's parser agrees.",
            _group_split,
        )
    ],
}


def disagreements(urls_per_file: int | None = None) -> Iterator[Disagreement]:
    """Every disagreement; *urls_per_file* limits the URLs tried per file and crawler."""
    matcher = google.RobotsMatcher()
    for path in sorted((CORPUS / "files").glob("*.txt")):
        text = path.read_bytes().decode("utf-8", "replace")
        ours = RobotsTxt.parse(text)
        protego = Protego.parse(text)
        for crawler in CRAWLERS:
            for url in corpus_urls(path.stem, ours)[:urls_per_file]:
                allowed = ours.allowed(url, crawler)
                peers = {
                    "google": matcher.is_allowed(text, crawler, url),
                    "protego": protego.can_fetch(url, crawler),
                }
                for peer, peer_allowed in peers.items():
                    if peer_allowed == allowed:
                        continue
                    reason = next(
                        (
                            label
                            for label, explains in REASONS[peer]
                            if explains(text, ours, crawler, url, peer_allowed)
                        ),
                        None,
                    )
                    yield Disagreement(peer, path.stem, crawler, url, allowed, reason)


def main() -> int:
    found = list(disagreements())
    print(f"{len(found)} disagreements")
    for peer in REASONS:
        mine = [d for d in found if d.peer == peer]
        print(f"\n## vs {peer}: {len(mine)}")
        for reason in sorted({d.reason or "UNEXPLAINED" for d in mine}):
            print(f"\n{reason}")
            for d in mine:
                if (d.reason or "UNEXPLAINED") == reason:
                    verdict = "allowed" if d.ours else "disallowed"
                    print(f"  - {d.file} {d.crawler} {d.url}: we say {verdict}")
    return 1 if any(d.reason is None for d in found) else 0


if __name__ == "__main__":
    sys.exit(main())
