"""What a parsed, checked file holds for the garbage collector: a broad crawl keeps
thousands of them, and every full collection traverses each object they hold."""

import gc

from scrapy_rfc9309 import RobotsTxt

BODY = b"User-agent: *\nDisallow: /private\n"
FILES = 200


def tracked_objects_per_file(checks: int) -> int:
    gc.collect()
    before = len(gc.get_objects())
    files = [RobotsTxt.parse(BODY) for _ in range(FILES)]
    for number, robots in enumerate(files):
        for page in range(checks):
            robots.check(f"https://site{number}.example/p/{page}", "MyCrawler/1.0")
        robots.delay("MyCrawler/1.0")
    gc.collect()  # untracks the tuples that hold no container
    return round((len(gc.get_objects()) - before) / FILES)  # what the test adds: 0.0x


def test_a_small_file_checked_holds_few_objects_the_collector_traverses():
    """10 checked once, 16 once compiled (Protego holds 10 for the same file): the
    file, its group, rule and lists, the crawler's rule set; no set, no cached group
    selection, and no list for a record the group does not have (Crawl-delay,
    Request-rate, preferences)."""
    assert tracked_objects_per_file(checks=1) <= 10
    assert tracked_objects_per_file(checks=2) <= 16
