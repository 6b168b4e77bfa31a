"""One contract, two ledgers: when a unit may start, in one process (``LocalLedger``,
on the monotonic clock) and in a fleet's Redis (``FleetSpacing``, on a real
redis-server's clock).  Each test is a scenario of processes (tokens) asking for a
unit; both backends must answer alike."""

import asyncio

import pytest
import pytest_twisted

from scrapy_rfc9309.fleet.spacing import FleetSpacing
from scrapy_rfc9309.ledger import LocalLedger
from tests.helpers import on_loop


@pytest.fixture(params=["local", "redis"])
def ledger(request):
    if request.param == "local":
        yield LocalLedger()
        return
    spacing = FleetSpacing(request.getfixturevalue("fleet_redis"))
    yield spacing
    spacing.close()


@pytest_twisted.ensureDeferred
async def test_one_request_at_a_time_and_the_next_waits_the_floor_after_the_end(ledger):
    async def scenario():
        waits = await asyncio.gather(
            *(ledger.acquire("a.example", 0.5, 30, f"P{n}") for n in range(4))
        )
        other = await ledger.acquire("b.example", 0.5, 30, "Q")  # another unit: no wait
        while_held = await ledger.acquire("a.example", 0.5, 30, "R")
        await ledger.release("a.example", 0.5, "P0")
        after_end = await ledger.acquire("a.example", 0.5, 30, "R")
        await asyncio.sleep(after_end)
        again = await ledger.acquire("a.example", 0.5, 30, "R")
        return list(waits), other, while_held, after_end, again

    waits, other, while_held, after_end, again = await on_loop(scenario())
    assert waits[0] == 0 and all(wait > 0 for wait in waits[1:])  # one holder at a time
    assert other == 0
    assert 0 < while_held <= 0.5  # asks again within the floor while another holds it
    assert after_end > 0.45  # the floor counts from the end
    assert again == 0


@pytest_twisted.ensureDeferred
async def test_a_held_unit_is_not_acquired_and_is_listed_until_its_hold_ends(ledger):
    async def scenario():
        await ledger.hold("a.example", 0.6)
        await ledger.hold("a.example", 0.2)  # a shorter hold does not shorten it
        await ledger.hold("b.example", 0.3)
        held = dict(await ledger.holds())
        wait = await ledger.acquire("a.example", 0.0, 30)
        await asyncio.sleep(0.65)
        return held, wait, await ledger.acquire("a.example", 0.0, 30), await ledger.holds()

    held, wait, acquired, still_held = await on_loop(scenario())
    assert set(held) == {"a.example", "b.example"}
    assert 0.5 < held["a.example"] <= 0.6 and 0.2 < held["b.example"] <= 0.3
    assert 0.5 < wait <= 0.6  # every process waits for the hold's end
    assert acquired == 0 and still_held == []


@pytest_twisted.ensureDeferred
async def test_a_lease_frees_a_dead_holders_unit_and_a_late_release_frees_nobody_else(ledger):
    """Process A died mid-request, or its release came late (Redis was away): B waits
    while A's lease runs, then takes the unit.  A's late release names A's
    acquisition, so B keeps the unit: C waits for B's request to end, not for A's."""

    async def scenario():
        assert await ledger.acquire("a.example", 0.1, 0.3, "A") == 0
        during_a = await ledger.acquire("a.example", 0.1, 30, "B")
        await asyncio.sleep(0.45)  # A's lease, then the floor: A's release is lost
        assert await ledger.acquire("a.example", 0.1, 30, "B") == 0
        await ledger.release("a.example", 0.1, "A")  # A's release, late
        await asyncio.sleep(0.15)  # past the floor after that late release
        while_b_holds = await ledger.acquire("a.example", 0.1, 30, "C")
        await ledger.release("a.example", 0.1, "B")
        await asyncio.sleep(0.15)
        return during_a, while_b_holds, await ledger.acquire("a.example", 0.1, 30, "C")

    during_a, while_b_holds, after_b = await on_loop(scenario())
    assert during_a > 0
    assert while_b_holds > 0
    assert after_b == 0


@pytest_twisted.ensureDeferred
async def test_the_largest_floor_any_process_asked_for_applies(ledger):
    async def scenario():
        await ledger.acquire("a.example", 2.0, 30, "A")  # a process that knows the delay
        await ledger.release("a.example", 2.0, "A")
        return await ledger.acquire("a.example", 0.0, 30, "B")  # one that does not (yet)

    assert await on_loop(scenario()) >= 1.9


@pytest_twisted.ensureDeferred
async def test_the_holder_asked_again_for_a_larger_floor_waits_it_and_keeps_the_unit(ledger):
    """A shared queue's pop held the unit before its process knew the unit's floor
    (its robots.txt was read meanwhile): asked again with the floor, the same
    acquisition waits the floor after the last end, and nobody else gets the unit."""

    async def scenario():
        assert await ledger.acquire("a.example", 0.0, 30, "F") == 0  # a robots.txt fetch
        await ledger.release("a.example", 0.0, "F")
        assert await ledger.acquire("a.example", 0.0, 30, "pop") == 0  # floor not known
        again = await ledger.acquire("a.example", 0.4, 30, "pop")  # now it is
        other = await ledger.acquire("a.example", 0.4, 30, "Q")
        await asyncio.sleep(again)
        return again, other, await ledger.acquire("a.example", 0.4, 30, "pop")

    again, other, finally_ = await on_loop(scenario())
    assert again > 0.35  # the floor after the robots.txt fetch ended
    assert other > 0  # the unit is still the pop's
    assert finally_ == 0


@pytest_twisted.ensureDeferred
async def test_a_unit_held_before_its_floor_is_known_is_not_asked_about_endlessly(ledger):
    """Another process holds the unit for its robots.txt fetch, no floor known yet:
    ask again after a poll interval (50 ms), not at once, and no later than the
    hold's lease."""

    async def scenario():
        assert await ledger.acquire("a.example", 0.0, 30, "robots") == 0
        long_held = await ledger.acquire("a.example", 0.0, 30, "page")
        assert await ledger.acquire("b.example", 0.0, 0.04, "robots") == 0
        short_held = await ledger.acquire("b.example", 0.0, 30, "page")
        return long_held, short_held

    long_held, short_held = await on_loop(scenario())
    assert 0.045 <= long_held <= 0.05
    # The lease ends first: its end, not the poll (0 if it ended already, on a
    # machine slow enough).
    assert short_held <= 0.04


@pytest_twisted.ensureDeferred
async def test_a_request_that_did_not_reach_the_site_spends_no_floor(ledger):
    """A request a later middleware dropped once it held its unit (its budget spent):
    released as not reached, the unit is free at once, its last end as it was; a
    request the site saw makes the next one wait the floor."""

    async def scenario():
        assert await ledger.acquire("a.example", 5.0, 30, "A") == 0
        await ledger.release("a.example", 5.0, "A", reached=False)
        unreached = await ledger.acquire("a.example", 5.0, 30, "B")
        await ledger.release("a.example", 5.0, "B")
        return unreached, await ledger.acquire("a.example", 5.0, 30, "C")

    unreached, reached = await on_loop(scenario())
    assert unreached == 0
    assert reached > 4.0
