"""``RobotsTxt.memory_estimate()``, which bounds the robots cache by memory, against
what ``tracemalloc`` measures on every file of the real corpus."""

import gc
import statistics
import tracemalloc
from pathlib import Path

import pytest

from scrapy_rfc9309 import RobotsTxt

CORPUS = Path(__file__).resolve().parents[1] / "data" / "robots-corpus" / "files"
FILES = sorted(CORPUS.glob("*.txt"))
CHUNKS = 2  # run in parallel by pytest-xdist


def held_after_a_crawlers_checks(body: bytes) -> tuple[int, RobotsTxt]:
    """Bytes held by a parsed file once one crawler checked a path under every rule
    (which compiles its rules and builds every branch of the rule index)."""
    gc.collect()  # also empties the free lists, whose reuse tracemalloc would not see
    tracemalloc.start()
    robots = RobotsTxt.parse(body)
    for rule in robots.rules("MyCrawler") or [None]:
        robots.allowed(rule.pattern if rule else "/", "MyCrawler")
    robots.allowed("/", "MyCrawler")
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return held, robots


def test_the_corpus_is_all_there():
    assert len(FILES) == 295


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_the_estimate_is_above_what_every_real_file_holds_and_not_far_above(chunk):
    ratios = []
    gc.freeze()  # what the test process holds already: each collection skips it
    try:
        for path in FILES[chunk::CHUNKS]:
            held, robots = held_after_a_crawlers_checks(path.read_bytes())
            assert robots.memory_estimate() >= held, path.name
            ratios.append(robots.memory_estimate() / held)
    finally:
        gc.unfreeze()
    assert statistics.median(ratios) <= 3
