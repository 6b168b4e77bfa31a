"""``RobotsTxt.memory_estimate()``, which bounds the robots cache by memory, against
what ``tracemalloc`` measures on every file of the real corpus."""

import gc
import statistics
import tracemalloc
from pathlib import Path

from scrapy_rfc9309 import RobotsTxt

CORPUS = Path(__file__).resolve().parents[1] / "data" / "robots-corpus" / "files"


def held_after_a_crawlers_checks(body: bytes) -> tuple[int, RobotsTxt]:
    """Bytes held by a parsed file once one crawler checked a path under every rule
    (which compiles its rules and builds every branch of the rule index)."""
    gc.collect()
    tracemalloc.start()
    robots = RobotsTxt.parse(body)
    for rule in robots.rules("MyCrawler") or [None]:
        robots.allowed(rule.pattern if rule else "/", "MyCrawler")
    robots.allowed("/", "MyCrawler")
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return held, robots


def test_the_estimate_is_above_what_every_real_file_holds_and_not_far_above():
    ratios = []
    for path in sorted(CORPUS.glob("*.txt")):
        held, robots = held_after_a_crawlers_checks(path.read_bytes())
        assert robots.memory_estimate() >= held, path.name
        ratios.append(robots.memory_estimate() / held)
    assert len(ratios) == 295
    assert statistics.median(ratios) <= 3
