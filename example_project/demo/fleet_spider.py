"""The fleet spider: the demo crawl as one of many processes sharing a Redis queue
(scrapy-redis).  ``make fleet-demo`` runs it (see ``demo/fleet.py``), adding this
module to ``SPIDER_MODULES``: kept apart from ``demo.spiders`` so that the demo runs
without scrapy-redis installed.  Start URLs go to the Redis list ``fleet:start_urls``."""

from __future__ import annotations

from scrapy_redis.spiders import RedisSpider


class FleetSpider(RedisSpider):
    name = "fleet"
    #: Where the fleet's start URLs are pushed (``LPUSH fleet:start_urls URL``).
    redis_key = "fleet:start_urls"

    def parse(self, response):
        # Followed links go through the shared queue: any process may fetch them.
        yield from response.follow_all(css="a")
