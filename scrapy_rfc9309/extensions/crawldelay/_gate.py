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


def _always() -> bool:
    return True


class EndToStartGate:
    """Admits one request at a time per floored slot key, none while *held(key)* (a
    host backing off, see :mod:`._backoff`), none while *has_place()* is false (see
    :meth:`set_places`); with *fleet*, only once the fleet's Redis holds the host for
    this process.  *floor* gives a key's floor."""

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
        self._has_place = _always
        self._parked: dict[str, None] = {}  # keys refused for want of a place, in order

    def set_places(self, has_place: Callable[[], bool]) -> None:
        """From now on a request starts only when ``has_place()``: the requests
        waiting here are left out of ``CONCURRENT_REQUESTS`` while they wait, and take
        a place of it to start (else hundreds whose floors pass together would start
        at once).  A slot refused for want of one is parked: see :meth:`start_parked`."""
        self._has_place = has_place

    def admits(self, slot: Slot) -> bool:
        request = _slots.queued_request(slot)
        if request is None:
            return False
        key = _slots.slot_key(request)
        if key is None or key in self._on_the_wire or self._held(key):
            return False
        if not self._has_place():
            self._parked[key] = None
            return False
        if self._fleet is not None and not self._fleet.admits(key, self._floor(key)):
            return False
        self._on_the_wire.add(key)
        self._admitted.add(key)
        self._waiting.discard(request)  # the downloader starts it now
        return True

    def start_parked(self, wake: Callable[[str], None]) -> None:
        """Have the slots parked for want of a place look at their queues again,
        longest parked first, while a place is free: *wake(key)* does it."""
        while self._parked and self._has_place():
            key = next(iter(self._parked))
            del self._parked[key]
            wake(key)

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
