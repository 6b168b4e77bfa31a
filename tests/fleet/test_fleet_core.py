"""The fleet's Redis primitives against a real redis-server: spacing reservations on the
server's clock, and the robots.txt lock that a dead process cannot hold for long."""

import asyncio

import pytest
import pytest_twisted
import redis

from scrapy_rfc9309.fleet.robots import SharedFetch, SharedRobots
from scrapy_rfc9309.fleet.spacing import FleetSpacing, SpacingError
from tests.budget.test_storage_contract import on_loop


@pytest.fixture
def url(redis_server):
    url = redis_server.url.rsplit("/", 1)[0] + "/6"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest_twisted.ensureDeferred
async def test_concurrent_reservations_are_spaced_by_the_floor(url):
    spacing = FleetSpacing(url)
    server = redis.Redis.from_url(url)
    seconds, micros = server.time()
    before = seconds + micros / 1e6  # the server's clock, which the starts are on

    async def scenario():
        started = asyncio.get_running_loop().time()
        waits = await asyncio.gather(*(spacing.reserve("a.example", 0.5) for _ in range(6)))
        window = asyncio.get_running_loop().time() - started  # the calls' spread, at most
        other = await spacing.reserve("b.example", 0.5)  # another host: no wait
        spacing.close()
        return sorted(waits), window, other

    waits, window, other = await on_loop(scenario())
    assert waits[0] == 0 and other == 0
    # Six starts of one host, 0.5 s apart: the i-th waits at least i x 0.5 s less the
    # time between the first call and its own (each wait is from its own call).
    assert all(wait >= index * 0.5 - window for index, wait in enumerate(waits)), (waits, window)
    booked = float(server.hget("rfc9309:spacing:a.example", "next")) / 1e6
    assert booked - before >= 6 * 0.5  # the next free start, after six floors
    server.close()


@pytest_twisted.ensureDeferred
async def test_the_largest_floor_any_process_asked_for_applies(url):
    spacing = FleetSpacing(url)

    async def scenario():
        await spacing.reserve("a.example", 2.0)  # a process that knows the Crawl-delay
        wait = await spacing.reserve("a.example", 0.0)  # one that does not (yet)
        spacing.close()
        return wait

    assert await on_loop(scenario()) >= 1.9


@pytest_twisted.ensureDeferred
async def test_an_unreachable_redis_is_a_spacing_error(silent_port):
    spacing = FleetSpacing(f"redis://127.0.0.1:{silent_port}/0", timeout=0.3)

    async def scenario():
        with pytest.raises(SpacingError):
            await spacing.reserve("a.example", 1.0)
        spacing.close()

    await on_loop(scenario())


@pytest_twisted.ensureDeferred
async def test_a_lock_left_by_a_dead_process_expires_and_publishing_releases_it(url):
    shared = SharedRobots(url)

    async def scenario():
        dead = await shared.lock("http://a.example", 0.3)  # a process killed mid-fetch
        assert dead is not None
        assert await shared.lock("http://a.example", 0.3) is None
        await asyncio.sleep(0.4)
        token = await shared.lock("http://a.example", 5)
        assert token is not None  # expired: another process may fetch
        fetch = SharedFetch("success", 200, b"User-agent: *\nDisallow: /x\n", ttl=60)
        await shared.publish("http://a.example", fetch, token)
        found = await shared.get("http://a.example")
        relock = await shared.lock("http://a.example", 5)
        shared.close()
        return found, relock

    found, relock = await on_loop(scenario())
    assert (found.outcome, found.status, found.body) == (
        "success",
        200,
        b"User-agent: *\nDisallow: /x\n",
    )
    assert 55 < found.ttl <= 60
    assert relock is not None  # publishing released the lock


class ReservingGates:
    """Stands in for FleetGates: every reservation says "start now" and is counted."""

    crawler = None

    def __init__(self):
        self.reservations = 0

    async def reserve(self, key, floor):
        self.reservations += 1
        return 0.0


@pytest_twisted.ensureDeferred
async def test_a_gate_admits_a_fresh_reserved_start_and_reserves_again_for_a_stale_one(
    monkeypatch,
):
    from scrapy.core.downloader import Slot

    from scrapy_rfc9309.extensions import _fleet, _slots

    monkeypatch.setattr(_slots, "wake", lambda crawler, key: None)
    clock = [1000.0]
    monkeypatch.setattr(_slots, "slot_clock", lambda: clock[0])
    gates = ReservingGates()
    gate = _fleet._Gate(gates, "a.example")
    slot = Slot(1, 0, 0)
    _slots.set_floor(slot, 1.0)

    async def scenario():
        assert not gate.admits(slot)  # no start reserved yet: one is asked for
        await asyncio.sleep(0.01)
        assert gate.admits(slot)  # reserved for now, not used
        clock[0] += 5  # the request did not leave; later, another process may have
        assert not gate.admits(slot)  # a start 5 s old is not used: reserve anew
        await asyncio.sleep(0.01)
        return gates.reservations, gate.admits(slot)

    assert await on_loop(scenario()) == (2, True)


@pytest_twisted.ensureDeferred
async def test_a_gate_reserves_the_next_start_as_a_request_leaves_only_if_another_waits(
    monkeypatch,
):
    from scrapy.core.downloader import Slot

    from scrapy_rfc9309.extensions import _fleet, _slots

    monkeypatch.setattr(_slots, "wake", lambda crawler, key: None)
    gates = ReservingGates()
    gate = _fleet._Gate(gates, "a.example")
    slot = Slot(1, 0, 0)
    _slots.set_floor(slot, 1.0)
    slot.queue.extend([("request", "deferred")] * 2)  # two requests wait

    async def scenario():
        gate.admits(slot)
        await asyncio.sleep(0.01)
        admitted = gate.admits(slot)  # the first leaves; the second's start is asked for
        slot.queue.popleft()
        slot.lastseen = _slots.slot_clock()  # what Scrapy does when it sends it
        await asyncio.sleep(0.01)
        ahead = gates.reservations
        admitted_alone = gate.admits(slot)  # the last leaves: nothing to reserve for
        slot.queue.popleft()
        await asyncio.sleep(0.01)
        return admitted, ahead, admitted_alone, gates.reservations

    assert await on_loop(scenario()) == (True, 2, True, 2)


def test_a_shared_fetch_keeps_the_cause_of_a_failed_redirect():
    # Fleet readers report "redirect loop" as the fetching process does, not "network error".
    fetch = SharedFetch("unavailable", None, None, ttl=60, reason="redirect loop")
    assert SharedFetch.decode(fetch.encode().encode(), 60).reason == "redirect loop"
    # A record written without the field (by an older version) still decodes.
    old = b'{"outcome": "unavailable", "status": 404, "body": null}'
    assert SharedFetch.decode(old, 60) == SharedFetch("unavailable", 404, None, 60)
