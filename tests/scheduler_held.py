"""An extension that keeps, in the ``test/scheduler_held_max`` stat, the most
requests the scheduler held at once: for the tests and ``benchmarks/bench_crawl.py``
(it imports Scrapy only, so a benchmark's crawl process holds nothing more)."""

from __future__ import annotations

from typing import Any

from scrapy import signals


class SchedulerHeld:
    def __init__(self, crawler: Any) -> None:
        self.stats = crawler.stats
        crawler.signals.connect(self.scheduled, signal=signals.request_scheduled)

    @classmethod
    def from_crawler(cls, crawler: Any) -> SchedulerHeld:
        return cls(crawler)

    def scheduled(self, request: Any = None, spider: Any = None) -> None:
        held = self.stats.get_value("scheduler/enqueued", 0) - self.stats.get_value(
            "scheduler/dequeued", 0
        )
        self.stats.max_value("test/scheduler_held_max", held + 1)  # this one comes next
