"""Every access to Scrapy's downloader slots, in one place: Scrapy plans to replace
its slot API, and only this module should have to follow.

Scrapy spaces the requests of a slot by ``slot.download_delay()``, drawn anew at
every gap: ``slot.delay`` varied by ``±slot.jitter``, where AutoThrottle rewrites
``slot.delay`` after each response.  A floor therefore has to apply *after* both,
inside ``download_delay()`` itself: a floored slot's class becomes a subclass whose
``download_delay()`` is ``max(floor, Slot.download_delay())``.  Scrapy's ``Slot``
has ``__slots__``, so the subclass adds no field (its instances keep the layout
that ``__class__`` assignment needs) and carries the floor as a class attribute:
one small class per distinct floor value.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import scrapy.core.downloader as _downloader
from scrapy.core.downloader import Downloader, Slot

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings


def slot_key(request: Request) -> str | None:
    """The key of the slot the downloader put *request* in (set once it reached it)."""
    key: str | None = request.meta.get(Downloader.DOWNLOAD_SLOT)
    return key


def slot(crawler: Crawler, key: str) -> Slot | None:
    """The live slot of *key*, if the downloader has one (idle slots are collected)."""
    engine = crawler.engine
    return engine.downloader.slots.get(key) if engine is not None else None


def configured_delays(settings: BaseSettings) -> tuple[float, dict[str, float]]:
    """The delay new slots get from the settings (``DOWNLOAD_DELAY``), and the slots
    that ``DOWNLOAD_SLOTS`` gives another one."""
    per_slot = {
        key: float(options["delay"])
        for key, options in settings.getdict("DOWNLOAD_SLOTS").items()
        if "delay" in options
    }
    return settings.getfloat("DOWNLOAD_DELAY"), per_slot


#: Floored classes by (base class, floor); distinct floors are few in practice, but
#: a broad crawl could meet many: past this many, the cache starts over.
_MAX_FLOORED_CLASSES = 256
_FLOORED_CLASSES: dict[tuple[type[Slot], float, Gate | None], type[Slot]] = {}


class Gate(Protocol):
    """Decides, when a slot could release its next request, whether it may now."""

    def admits(self, slot: Slot) -> bool: ...


def _floored_class(base: type[Slot], floor: float, gate: Gate | None) -> type[Slot]:
    cls = _FLOORED_CLASSES.get((base, floor, gate))
    if cls is None:
        if len(_FLOORED_CLASSES) >= _MAX_FLOORED_CLASSES:
            _FLOORED_CLASSES.clear()  # live slots keep their classes alive

        def download_delay(self: Slot) -> float:
            return max(floor, base.download_delay(self))

        namespace: dict[str, Any] = {
            "__slots__": (),
            "floor": floor,
            "base": base,
            "download_delay": download_delay,
        }
        if gate is not None:
            # Scrapy releases a queued request only while this is positive.
            def free_transfer_slots(self: Slot) -> int:
                free = base.free_transfer_slots(self)
                return free if free <= 0 or gate.admits(self) else 0

            namespace["free_transfer_slots"] = free_transfer_slots
        cls = type(f"Floored{base.__name__}", (base,), namespace)
        _FLOORED_CLASSES[base, floor, gate] = cls
    return cls


class SlotSeamError(RuntimeError):
    """Scrapy's downloader slots no longer work the way this module relies on."""


def check_seam() -> None:
    """Verify on a real ``Slot`` of the installed Scrapy that a floor can be set and
    holds against its delay, and can be removed; raise :class:`SlotSeamError` if not
    (a Scrapy release changed ``Slot``), so that the crawl stops at start-up instead
    of throttling silently stopping inside a signal handler."""
    try:
        probe = Slot(1, 0.1, 0)  # no jitter (the third argument across versions)
        set_floor(probe, 5.0)
        floored = probe.download_delay()
        set_floor(probe, 0.0)
        restored = probe.download_delay()
        last_start(probe)
        probe.free_transfer_slots()
        probe.latercall  # noqa: B018 (read by wake())
        queued(probe)
        Downloader._process_queue  # noqa: B018
        Downloader.needs_backout  # noqa: B018
    except (TypeError, AttributeError) as exc:
        raise SlotSeamError(f"{type(exc).__name__}: {exc}") from exc
    if floored != 5.0 or restored != 0.1 or type(probe) is not Slot:
        raise SlotSeamError(f"a floor of 5 s gave {floored!r}, removing it {restored!r}")


def floor_of(slot: Slot) -> float:
    """The floor set on *slot*, 0 if none."""
    return float(getattr(type(slot), "floor", 0.0))


def set_floor(slot: Slot, floor: float, gate: Gate | None = None) -> None:
    """From now on, at least *floor* seconds between the starts of *slot*'s requests,
    whatever its delay, jitter or AutoThrottle say (0 removes the floor).  With a
    *gate*, a request leaves only when the gate also admits it (see :func:`wake`)."""
    base: type[Slot] = getattr(type(slot), "base", type(slot))
    slot.__class__ = _floored_class(base, floor, gate) if floor > 0 else base


def leave_out_of_concurrency(crawler: Crawler, waiting: Callable[[], int]) -> None:
    """From now on, the downloader's ``CONCURRENT_REQUESTS`` test leaves out the
    requests *waiting()* counts.

    Scrapy counts a request against ``CONCURRENT_REQUESTS`` from the moment it
    reaches the downloader, including while it waits in its slot's queue for the
    slot's delay: a few hosts with a long Crawl-delay would hold every place, and
    the engine would stop taking requests for the other hosts.
    """
    downloader = crawler.engine.downloader
    try:
        len(downloader.active) + downloader.total_concurrency
    except (AttributeError, TypeError) as exc:
        raise SlotSeamError(f"{type(exc).__name__}: {exc}") from exc

    def needs_backout() -> bool:
        total = downloader.total_concurrency
        return 0 < total <= len(downloader.active) - waiting()

    downloader.needs_backout = needs_backout  # type: ignore[method-assign]


def poll_scheduler(crawler: Crawler) -> None:
    """Have the engine ask the scheduler for requests now, as its heartbeat does every
    5 s.  The engine otherwise asks only when one of its own requests ends: a process
    whose requests all wait for a Crawl-delay would not look at a shared queue
    (scrapy-redis) for seconds, though its places are free."""
    engine_slot = getattr(crawler.engine, "_slot", None)
    if engine_slot is not None:
        engine_slot.nextcall.schedule()


def queued(slot: Slot) -> int:
    """How many requests wait in *slot*'s queue (not yet sent)."""
    return len(slot.queue)


def wake(crawler: Crawler, key: str) -> None:
    """Have the downloader look at slot *key*'s queue again (after its gate, which
    refused a request, would now admit it)."""
    live = slot(crawler, key)
    if live is not None and not live.latercall:
        crawler.engine.downloader._process_queue(live)


# The clock Scrapy's downloader stamps ``slot.lastseen`` with: ``time.monotonic``
# since Scrapy 2.16, ``time.time`` before.
_SLOT_CLOCK = time.monotonic if hasattr(_downloader, "monotonic") else time.time


def slot_clock() -> float:
    """The clock of :func:`last_start` (the one Scrapy's downloader uses)."""
    return _SLOT_CLOCK()


def last_start(slot: Slot) -> float:
    """When *slot* last started a request (on the clock of :func:`slot_clock`)."""
    return float(slot.lastseen)


def continue_after(slot: Slot, started: float) -> None:
    """*slot* replaces a collected one whose last request started at *started*: its
    next request waits as if the old slot had lived on."""
    slot.lastseen = max(slot.lastseen, started)
