"""The gate of a crawler's floored slots: end-to-start spacing, as the site sees it.

A floored slot starts a request only when none of its requests is on the wire, and
the downloader spaces it from ``slot.lastseen``, which the throttle moves to the
moment the previous request ended: the next request starts no earlier than the floor
after the previous response completed (Crawl-delay as Yandex defines it, and as Nutch
and Heritrix space requests).  A late start on a busy event loop can then only make
the site's gap longer, never shorter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from . import _slots

if TYPE_CHECKING:
    from scrapy.core.downloader import Slot

    from ._fleet import FleetGates


def _never_held(key: str) -> bool:
    return False


class EndToStartGate:
    """Admits one request at a time per floored slot key, none while *held(key)* (a
    host backing off, see :mod:`._backoff`); with *fleet*, only once the fleet's
    Redis holds the host for this process.  *floor* gives a key's floor."""

    def __init__(
        self,
        floor: Callable[[str], float],
        fleet: FleetGates | None,
        held: Callable[[str], bool] | None = None,
    ) -> None:
        self._floor = floor
        self._fleet = fleet
        self._held = held or _never_held
        self._on_the_wire: set[str] = set()  # keys with a started request not yet ended
        self._admitted: set[str] = set()  # those this gate let start

    def admits(self, slot: Slot) -> bool:
        key = _slots.queued_key(slot)
        if key is None or key in self._on_the_wire or self._held(key):
            return False
        if self._fleet is not None and not self._fleet.admits(key, self._floor(key)):
            return False
        self._on_the_wire.add(key)
        self._admitted.add(key)
        return True

    def started_elsewhere(self, key: str) -> None:
        """A request of *key* went on the wire before its slot was gated."""
        self._on_the_wire.add(key)

    def ended(self, key: str) -> bool:
        """A request of *key* ended; True if it was one this gate had let start."""
        self._on_the_wire.discard(key)
        if key in self._admitted:
            self._admitted.discard(key)
            return True
        return False
