"""The floor arithmetic of the throttle's slot seam, on Scrapy's real ``Slot``: the
floor holds whatever the slot's own delay, jitter or AutoThrottle say.  (The gaps a
site sees are measured in ``test_crawldelay.py``.)"""

from scrapy import Request
from scrapy.core.downloader import Slot

from scrapy_rfc9309.extensions.crawldelay import _slots
from scrapy_rfc9309.extensions.crawldelay._lastseen import LastSeen

DRAWS = 10_000


class Admitting:
    def admits(self, slot):
        return True


GATE = Admitting()


def delays(slot):
    return [slot.download_delay() for _ in range(DRAWS)]


def test_the_floor_holds_against_a_shorter_delay_with_full_jitter():
    slot = Slot(1, 0.2, 0.9)
    _slots.set_floor(slot, 0.5, GATE)
    assert min(delays(slot)) == 0.5
    assert max(delays(slot)) == 0.5  # 0.2 + 90 % never reaches the floor


def test_the_floor_holds_when_autothrottle_lowers_the_delay():
    slot = Slot(1, 0.5, 0.5)
    _slots.set_floor(slot, 0.5, GATE)
    slot.delay = 0.01  # what AutoThrottle does to a fast slot after each response
    assert min(delays(slot)) == 0.5


def test_a_longer_delay_keeps_its_jitter_above_the_floor():
    slot = Slot(1, 1.0, 0.5)
    _slots.set_floor(slot, 0.8, GATE)
    drawn = delays(slot)
    assert min(drawn) == 0.8  # 0.5 to 1.5 drawn, floored at 0.8
    assert max(drawn) > 1.2


def test_removing_the_floor_gives_back_scrapys_slot():
    slot = Slot(1, 0.2, 0)
    _slots.set_floor(slot, 0.5, GATE)
    assert _slots.floor_of(slot) == 0.5
    _slots.set_floor(slot, 2.0, GATE)  # a longer Crawl-delay arrives
    assert (_slots.floor_of(slot), slot.download_delay()) == (2.0, 2.0)
    _slots.set_floor(slot, 0, None)
    assert type(slot) is Slot
    assert (_slots.floor_of(slot), slot.download_delay()) == (0.0, 0.2)


def test_many_distinct_floors_each_hold():
    slots = [Slot(1, 0.0, 0) for _ in range(600)]  # more than the floored classes kept
    for number, slot in enumerate(slots):
        _slots.set_floor(slot, 1 + number / 1000, GATE)
    assert [slot.download_delay() for slot in slots] == [1 + n / 1000 for n in range(600)]


def test_a_slot_made_again_waits_for_the_last_request_of_the_one_it_replaces():
    slot = Slot(1, 0.0, 0)
    slot.lastseen = 100.0
    _slots.continue_after(slot, 250.0)
    assert _slots.last_seen(slot) == 250.0
    _slots.continue_after(slot, 10.0)  # never earlier than its own
    assert _slots.last_seen(slot) == 250.0


def test_last_seen_slots_are_forgotten_once_their_floor_has_passed():
    now = [100.0]
    floors = {"slow": 10.0, "fast": 1.0}
    seen = LastSeen(floors.__getitem__, lambda: now[0], sweep_every=3)
    seen.record("slow", 95.0)
    seen.record("fast", 98.0)
    assert (seen.get("slow"), seen.get("fast")) == (95.0, 98.0)
    now[0] = 100.0  # slow waits until 105, fast until 99: fast is forgotten
    seen.record("slow", 96.0)
    assert (seen.get("slow"), seen.get("fast")) == (96.0, None)
    now[0] = 106.0
    seen.record("fast", 105.5)
    seen.record("fast", 105.9)
    seen.record("fast", 106.0)
    assert (seen.get("slow"), seen.get("fast")) == (None, 106.0)


class Refusing:
    def __init__(self):
        self.asked = 0

    def admits(self, slot):
        self.asked += 1
        return False


def test_a_floored_slot_starts_one_request_at_a_time_and_asks_its_gate():
    slot = Slot(8, 0.0, 0)
    gate = Refusing()
    _slots.set_floor(slot, 1.0, gate)
    slot.transferring.add(object())
    assert slot.free_transfer_slots() == 0  # one on the wire: the gate is not asked
    assert gate.asked == 0
    slot.transferring.clear()
    assert slot.free_transfer_slots() == 0
    assert gate.asked == 1
    _slots.set_floor(slot, 1.0, GATE)
    assert slot.free_transfer_slots() == 1  # never 8: one at a time


def test_the_end_of_a_request_moves_the_slot_clock_forward():
    slot = Slot(1, 0.0, 0)
    slot.lastseen = _slots.slot_clock() - 100
    _slots.mark_end(slot)
    assert _slots.slot_clock() - _slots.last_seen(slot) < 1


def test_a_request_started_before_its_slot_was_gated_holds_the_next_until_it_ends():
    from scrapy_rfc9309.extensions.crawldelay._gate import EndToStartGate

    gate = EndToStartGate(lambda key: 1.0, None)
    slot = Slot(8, 0.0, 0)
    slot.queue.append((Request("http://a.example/2", meta={"download_slot": "a"}), None))
    gate.started_elsewhere("a")  # on the wire when robots.txt gave the slot its floor
    assert not gate.admits(slot)
    assert gate.ended("a") is False  # ended, but not one the gate let start
    assert gate.admits(slot)
    assert not gate.admits(slot)  # one at a time
    assert gate.ended("a") is True
