"""``SCHEDULER_PRIORITY_QUEUE = "scrapy_rfc9309.pqueues.HostReadyPriorityQueue"``: the
throttle's scheduler queue at the path settings name (it lives with the throttle, in
:mod:`scrapy_rfc9309.extensions.crawldelay._pqueue`)."""

from .extensions.crawldelay._pqueue import HostReadyPriorityQueue

__all__ = ["HostReadyPriorityQueue"]
