"""The gate of a crawler's floored slots: end-to-start spacing, as the site sees it.

A floored slot starts a request only when none of its requests is on the wire, and
the downloader spaces it from ``slot.lastseen``, which the throttle moves to the
moment the previous request ended: the next request starts no earlier than the floor
after the previous response completed (Crawl-delay as Yandex defines it, and as Nutch
and Heritrix space requests).  A late start on a busy event loop can then only make
the site's gap longer, never shorter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from . import _slots

if TYPE_CHECKING:
    from scrapy import Request
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
        self._waiting: set[Request] = set()  # requests queued in gated slots

    def admits(self, slot: Slot) -> bool:
        request = _slots.queued_request(slot)
        key = _slots.slot_key(request) if request is not None else None
        if key is None or key in self._on_the_wire or self._held(key):
            return False
        if self._fleet is not None and not self._fleet.admits(key, self._floor(key)):
            return False
        self._on_the_wire.add(key)
        self._admitted.add(key)
        self._waiting.discard(request)  # the downloader starts it now
        return True

    @property
    def waiting(self) -> int:
        """How many requests wait in gated slots' queues for their turn: counted as
        they come and go, since a broad crawl has thousands of such slots at once,
        and Scrapy asks for this before each request it takes."""
        return len(self._waiting)

    def wait(self, requests: Iterable[Request]) -> None:
        """*requests* are queued in a gated slot."""
        self._waiting.update(requests)

    def stop_waiting(self, requests: Iterable[Request]) -> None:
        """*requests* no longer wait for this gate (their slot was given back, or they
        left the downloader: a miscount cannot outlive the request)."""
        self._waiting.difference_update(requests)

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
