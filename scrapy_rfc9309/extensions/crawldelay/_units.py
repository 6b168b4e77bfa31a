"""The politeness unit (``CRAWLDELAY_UNIT``): what one Crawl-delay spaces.

* ``"host"`` (the default): each host name, as Scrapy's download slots are;
* ``"domain"``: each registrable domain (the public suffix list, offline):
  ``a.example.com`` and ``b.example.com`` are one unit, spaced by the largest floor
  of their hosts (100 subdomains with ``Crawl-delay: 1`` are one request a second to
  the site, not a hundred).

A host name without a public suffix (``a.example.test``, ``db.internal``,
``printer.lan``, a single label) has no registrable domain: it is a unit of its own,
said once per crawl at WARNING with an example.  ``CRAWLDELAY_SITES`` names such
sites: a list of domains, each of which, with every host under it, is one unit (the
longest listed domain a host is under wins); it applies under ``"domain"`` only.

IP addresses and ``localhost`` are units of their own under both.  (Spacing by IP
address would need the address Scrapy resolved for each request, which no public
interface gives; it is not offered.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..._settings import CRAWLDELAY_DEFAULTS, CRAWLDELAY_UNITS, SettingError, choice, with_defaults
from ...budget.policy import (
    domain_problem,
    is_ip_or_local,
    normalise_host,
    registrable_domain,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


def _host(host: str) -> str:
    return host


class DomainUnits:
    """The unit key of a host under ``CRAWLDELAY_UNIT = "domain"``: the longest of
    *sites* it is under, else its registrable domain, else the host itself (said
    once, naming the first such host)."""

    def __init__(self, sites: frozenset[str]) -> None:
        self.sites = sites
        self._said = False

    def __call__(self, host: str) -> str:
        if self.sites:
            labels = host.split(".")
            for start in range(len(labels)):
                site = ".".join(labels[start:])
                if site in self.sites:
                    return site
        unit = registrable_domain(host)
        if unit == host and not self._said and not is_ip_or_local(host):
            self._said = True
            logger.warning(
                "CRAWLDELAY_UNIT = 'domain': %s has no public suffix, so each such host "
                "is a unit of its own (not spaced with its site's other hosts); list its "
                "site in CRAWLDELAY_SITES (e.g. [%r]) to space its hosts as one",
                host,
                host.split(".", 1)[1] if "." in host else host,
            )
        return unit


def _sites(settings: BaseSettings) -> frozenset[str]:
    value = settings.get("CRAWLDELAY_SITES") or []
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise SettingError(f"CRAWLDELAY_SITES must be a list of domains, not {value!r}")
    for entry in value:
        problem = domain_problem(entry)
        if problem is not None:
            raise SettingError(f"CRAWLDELAY_SITES entry {entry!r} {problem}")
    return frozenset(normalise_host(entry) for entry in value)


def unit_name(settings: BaseSettings) -> str:
    """What a unit is, for log lines: ``host`` or ``domain`` (``CRAWLDELAY_UNIT``)."""
    return choice(with_defaults(settings, CRAWLDELAY_DEFAULTS), "CRAWLDELAY_UNIT", CRAWLDELAY_UNITS)


def unit_of_host(settings: BaseSettings) -> Callable[[str], str]:
    """The unit key of a host name, by ``CRAWLDELAY_UNIT`` (and ``CRAWLDELAY_SITES``)."""
    settings = with_defaults(settings, CRAWLDELAY_DEFAULTS)
    sites = _sites(settings)
    if choice(settings, "CRAWLDELAY_UNIT", CRAWLDELAY_UNITS) == "host":
        return _host
    return DomainUnits(sites)
