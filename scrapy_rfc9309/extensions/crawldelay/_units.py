"""The politeness unit (``CRAWLDELAY_UNIT``): what one Crawl-delay spaces.

* ``"host"`` (the default): each host name, as Scrapy's download slots are;
* ``"domain"``: each registrable domain (the public suffix list, offline):
  ``a.example.com`` and ``b.example.com`` are one unit, spaced by the largest floor
  of their hosts (100 subdomains with ``Crawl-delay: 1`` are one request a second to
  the site, not a hundred).

IP addresses and ``localhost`` are units of their own under both.  (Spacing by IP
address would need the address Scrapy resolved for each request, which no public
interface gives; it is not offered.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..._settings import CRAWLDELAY_DEFAULTS, CRAWLDELAY_UNITS, choice, with_defaults
from ...budget.policy import registrable_domain

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _host(host: str) -> str:
    return host


_UNIT_OF_HOST: dict[str, Callable[[str], str]] = {
    "host": _host,
    "domain": registrable_domain,  # cached there
}


def unit_of_host(settings: BaseSettings) -> Callable[[str], str]:
    """The unit key of a host name, by ``CRAWLDELAY_UNIT``."""
    name = choice(with_defaults(settings, CRAWLDELAY_DEFAULTS), "CRAWLDELAY_UNIT", CRAWLDELAY_UNITS)
    return _UNIT_OF_HOST[name]
