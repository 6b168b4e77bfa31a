"""Spider middleware: the spider's start requests read as the add-on's scheduler
queue can take them (``SPIDER_MIDDLEWARES = {"scrapy_rfc9309.StartPaceMiddleware":
10}``; the add-on adds it).

Scrapy reads ``Spider.start()`` as fast as it yields, and on without a pause while
its downloader is full, so a broad crawl's start requests all reach the scheduler
early.  With :class:`~scrapy_rfc9309.pqueues.HostReadyPriorityQueue`, a new site's
requests wait there while its robots.txt is read, half of ``CONCURRENT_REQUESTS``
sites at a time: start requests, each of a new site, would pile up behind those
reads, held in memory and walked by the garbage collector.  Before handing Scrapy
the next start item, this middleware waits while as many sites wait for their
robots.txt read as the queue reads at once, or while ``CONCURRENT_REQUESTS`` start
items wait in the queue that Scrapy has not asked for (its downloader is full: the
lazy start Scrapy's documentation shows), for :data:`MOST` seconds at the most.
The requests callbacks yield never wait.  With another queue (Scrapy's, a fleet's
shared one) it does nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._shared import offers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.crawler import Crawler
    from typing_extensions import Self

#: The longest a start request waits for room (seconds): the crawl goes on whatever
#: the queue holds.
MOST = 5.0


class StartPaceMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self._offers = offers(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item_or_request in start:
            room = self._offers.start_room
            if room is not None:
                await room(MOST)
            yield item_or_request
