"""Every reach into Scrapy's private parts, in one module, each checked by behaviour
against the running Scrapy when a crawl starts (:func:`check_slots`,
:func:`check_engine`, :func:`leave_out_of_concurrency`): a Scrapy release that moved
one stops the crawl with a message naming it, instead of a crawl that runs
unthrottled or hangs.

Public attributes are used where they give the guarantee (``Downloader.slots``,
``Slot.delay``/``jitter`` are what Scrapy's own AutoThrottle uses); the private reaches
left, and why no public one does:

=====================================  =============================================
reach                                  why
=====================================  =============================================
a floored slot's ``__class__``         ``download_delay()`` is drawn anew at every
                                       gap from ``delay`` and ``jitter``, which
                                       AutoThrottle rewrites after each response: a
                                       floor must apply after both, inside it; and
                                       ``free_transfer_slots()`` is the only point
                                       where the downloader asks before it starts a
                                       request (one at a time, end to start).
``Slot.lastseen``                      the downloader spaces starts from it: moved to
                                       the end of a response, it spaces end to start.
``Downloader._process_queue(slot)``    has a slot look at its queue again once its
                                       previous request has ended.
``Slot.queue`` (its head)              the request a gated slot would start next.
``Downloader.active``                  tells a request the scheduler released that is
                                       still being handled from one that is done
                                       (dropped by a middleware or downloaded).
``engine._slot.nextcall.schedule()``   has the engine ask the scheduler again when a
                                       host becomes ready (it asks by itself only
                                       when a request ends, and every 5 s).
=====================================  =============================================

Scrapy's ``Slot`` has ``__slots__``, so the floored subclass adds no field (its
instances keep the layout that ``__class__`` assignment needs) and carries the floor
and the gate as class attributes: one small class per distinct (floor, gate).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import scrapy
from scrapy import Request
from scrapy.core.downloader import Downloader, Slot
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class SeamError(RuntimeError):
    """A private part of Scrapy this package relies on no longer behaves as expected."""

    def __init__(self, seam: str, detail: str) -> None:
        super().__init__(
            f"Scrapy {scrapy.__version__} changed {seam} ({detail}): the Crawl-delay "
            f"throttle cannot keep its floor with it; set CRAWLDELAY_ENABLED = False, or "
            f"use a Scrapy version this package supports"
        )
        self.seam = seam


class Gate(Protocol):
    """Asked, when a floored slot could start its next request, whether it may: a
    ``True`` means the downloader starts it now."""

    def admits(self, slot: Slot) -> bool: ...


def slot_key(request: Request) -> str | None:
    """The key of the slot the downloader put *request* in (set once it reached it)."""
    key: str | None = request.meta.get(Downloader.DOWNLOAD_SLOT)
    return key


def slot(crawler: Crawler, key: str) -> Slot | None:
    """The live slot of *key*, if the downloader has one (idle slots are collected)."""
    engine = crawler.engine
    return engine.downloader.slots.get(key) if engine is not None else None


# -- floored slots -----------------------------------------------------------

#: Floored classes by (base class, floor, gate); distinct floors are few in practice,
#: but a broad crawl could meet many: past this many, the cache starts over.
_MAX_FLOORED_CLASSES = 256
_FLOORED_CLASSES: dict[tuple[type[Slot], float, Gate], type[Slot]] = {}


def _floored_class(base: type[Slot], floor: float, gate: Gate) -> type[Slot]:
    cls = _FLOORED_CLASSES.get((base, floor, gate))
    if cls is None:
        if len(_FLOORED_CLASSES) >= _MAX_FLOORED_CLASSES:
            _FLOORED_CLASSES.clear()  # live slots keep their classes alive

        def download_delay(self: Slot) -> float:
            return max(floor, base.download_delay(self))

        def free_transfer_slots(self: Slot) -> int:
            # Scrapy starts a queued request only while this is positive.
            if self.transferring or base.free_transfer_slots(self) <= 0:
                return 0
            return 1 if gate.admits(self) else 0

        namespace: dict[str, Any] = {
            "__slots__": (),
            "floor": floor,
            "gate": gate,
            "base": base,
            "download_delay": download_delay,
            "free_transfer_slots": free_transfer_slots,
        }
        cls = type(f"Floored{base.__name__}", (base,), namespace)
        _FLOORED_CLASSES[base, floor, gate] = cls
    return cls


def floor_of(slot: Slot) -> float:
    """The floor set on *slot*, 0 if none."""
    return float(getattr(type(slot), "floor", 0.0))


def is_gated(slot: Slot) -> bool:
    """Whether *slot* asks a gate before it starts a request."""
    return getattr(type(slot), "gate", None) is not None


def set_floor(slot: Slot, floor: float, gate: Gate | None) -> None:
    """From now on, *slot* starts a request only when none of its requests is being
    downloaded, at least *floor* seconds after the last one started or ended (see
    :func:`mark_end`) whatever its delay, jitter or AutoThrottle say, and when *gate*
    admits it.  ``None`` gives back Scrapy's own slot."""
    base: type[Slot] = getattr(type(slot), "base", type(slot))
    slot.__class__ = base if gate is None else _floored_class(base, floor, gate)


def queued_request(slot: Slot) -> Request | None:
    """The request *slot* would start next, if it has one queued."""
    return slot.queue[0][0] if slot.queue else None


def queued_requests(slot: Slot) -> list[Request]:
    """The requests waiting in *slot*'s queue (not yet sent)."""
    return [request for request, _ in slot.queue]


def queued(slot: Slot) -> int:
    """How many requests wait in *slot*'s queue (not yet sent)."""
    return len(slot.queue)


def transferring(slot: Slot) -> int:
    """How many of *slot*'s requests are being downloaded."""
    return len(slot.transferring)


def wake(crawler: Crawler, key: str) -> None:
    """Have the downloader look at slot *key*'s queue again (after a gate that refused
    a request would now admit it)."""
    live = slot(crawler, key)
    if live is not None and not live.latercall:
        crawler.engine.downloader._process_queue(live)


# -- the slot clock ----------------------------------------------------------

#: The clock the running Scrapy's downloader stamps ``slot.lastseen`` with, as
#: :func:`check_downloader` found it (``time.monotonic`` since Scrapy 2.16).
_slot_clock: Callable[[], float] = time.monotonic


def slot_clock() -> float:
    """The time on the clock of :func:`last_seen`."""
    return _slot_clock()


def last_seen(slot: Slot) -> float:
    """When *slot* last started a request, or ended one (see :func:`mark_end`)."""
    return float(slot.lastseen)


def mark_end(slot: Slot) -> None:
    """A request of *slot* ended now: its next one is spaced from now."""
    slot.lastseen = max(slot.lastseen, _slot_clock())


def continue_after(slot: Slot, seen: float) -> None:
    """*slot* replaces a collected one last seen at *seen*: its next request waits as
    if the old slot had lived on."""
    slot.lastseen = max(slot.lastseen, seen)


# -- start-up checks -----------------------------------------------------------


class _Refusing:
    """A gate that refuses, and keeps the request it was asked about."""

    def __init__(self) -> None:
        self.asked: Request | None = None

    def admits(self, slot: Slot) -> bool:
        self.asked = queued_request(slot)
        return False


def check_slots() -> None:
    """Verify on a probe slot, with Scrapy's own ``Downloader._process_queue``, that a
    floor spaces from ``lastseen`` (which tells the slot clock), that a gate is asked
    before a start and can hold it, and that the floor comes off again; raise
    :class:`SeamError` naming what moved.  Nothing is downloaded: the probe's only
    request is a ``data:`` URL that the gate holds, and the downloader is a bare
    instance (``_process_queue`` uses none of its state)."""
    global _slot_clock
    probe = Slot(1, 0.0, 0.0)
    downloader = Downloader.__new__(Downloader)
    try:
        gate = _Refusing()
        set_floor(probe, 1000.0, gate)
        if probe.download_delay() != 1000.0:
            raise SeamError("Slot.download_delay", "a floored slot's delay is not the floor")
        request = Request("data:,probe")
        probe.queue.append((request, Deferred()))
        for clock in (time.monotonic, time.time):
            probe.lastseen = clock()
            downloader._process_queue(probe)
            if probe.latercall is not None:
                _slot_clock = clock
                break
        else:
            raise SeamError(
                "Downloader._process_queue", "it no longer waits for Slot.lastseen + the delay"
            )
        probe.close()
        probe.lastseen = _slot_clock() - 2000.0  # the floor has passed
        downloader._process_queue(probe)
        if gate.asked is not request or len(probe.queue) != 1:
            raise SeamError(
                "Slot.free_transfer_slots", "the downloader starts requests without asking it"
            )
        set_floor(probe, 0.0, None)
        if type(probe) is not Slot or probe.download_delay() != 0.0:
            raise SeamError("Slot", "a floored slot cannot be given back")
    except (AttributeError, TypeError) as exc:
        raise SeamError("the downloader's slots", f"{type(exc).__name__}: {exc}") from exc
    finally:
        probe.close()


def check_engine(crawler: Crawler) -> None:
    """Verify, once the engine exists, what :func:`settle` and
    :func:`wake_engine` use: the downloader's set of the requests it handles, and the
    engine's call that has it ask the scheduler (called once: a harmless extra look)."""
    engine = crawler.engine
    try:
        if not isinstance(engine.downloader.active, set):
            raise SeamError("Downloader.active", "it is no longer a set of requests")
        if not wake_engine(crawler):
            raise SeamError("ExecutionEngine._slot", "the engine has no open slot")
    except (AttributeError, TypeError) as exc:
        raise SeamError("the engine", f"{type(exc).__name__}: {exc}") from exc


def leave_out_of_concurrency(crawler: Crawler, waiting: Callable[[], int], most: int) -> None:
    """From now on, the downloader's ``CONCURRENT_REQUESTS`` test leaves out the
    requests *waiting()* counts, *most* of them at most.

    Scrapy counts a request against ``CONCURRENT_REQUESTS`` from the moment it
    reaches the downloader, including while it waits in its slot's queue for the
    slot's delay: a few hosts with a long Crawl-delay would hold every place, and
    the engine would stop taking requests for the other hosts.  Checked by
    behaviour first: with as many requests active as places, Scrapy's own test must
    back out (it is the one replaced).
    """
    downloader = crawler.engine.downloader
    original = downloader.needs_backout
    total = downloader.total_concurrency

    def needs_backout() -> bool:
        return 0 < total <= len(downloader.active) - min(waiting(), most)

    probes = [Request(f"data:,{n}") for n in range(total)]
    downloader.active.update(probes)
    try:
        held = original()
    finally:
        downloader.active.difference_update(probes)
    if total and not held:
        raise SeamError("Downloader.needs_backout", "it does not count Downloader.active")
    downloader.needs_backout = needs_backout  # type: ignore[method-assign]


def settle(crawler: Crawler, taken: dict[Request, str]) -> list[str]:
    """Remove from *taken* (requests a scheduler queue released, by slot key) those
    the downloader is done with, downloaded or dropped by a middleware; return their
    keys.  Both host-ready queues learn this way what ``request_left_downloader``
    does not say: a request a downloader middleware dropped never reaches it."""
    active = crawler.engine.downloader.active
    left = [request for request in taken if request not in active]
    return [taken.pop(request) for request in left]


def wake_engine(crawler: Crawler) -> bool:
    """Have the engine ask the scheduler for requests soon; False if it has no open
    slot (the crawl is closing)."""
    engine_slot = getattr(crawler.engine, "_slot", None)
    if engine_slot is None:
        return False
    engine_slot.nextcall.schedule()
    return True
