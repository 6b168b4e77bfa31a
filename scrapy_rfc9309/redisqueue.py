"""``SCHEDULER_QUEUE_CLASS = "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"``: the
throttle's shared queue for scrapy-redis fleets at the path settings name (it lives
with the throttle, in :mod:`scrapy_rfc9309.extensions.crawldelay._redisqueue`)."""

from .extensions.crawldelay._redisqueue import HostReadyRedisQueue

__all__ = ["HostReadyRedisQueue"]
