"""The fleet's Redis primitives against a real redis-server: hosts held and let go on the
server's clock, and the robots.txt lock that a dead process cannot hold for long."""

import asyncio
import time

import pytest
import pytest_twisted
import redis

from scrapy_rfc9309.fleet.robots import SharedFetch, SharedRobots
from scrapy_rfc9309.fleet.spacing import FleetSpacing, SpacingError
from tests.helpers import on_loop
from tests.scrapy.test_unit_states import Floor


@pytest.fixture
def url(redis_server):
    url = redis_server.url.rsplit("/", 1)[0] + "/6"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest_twisted.ensureDeferred
async def test_the_floor_counts_from_the_end_on_the_servers_clock(url):
    """The rest of the contract: tests/core/test_ledger_contract.py."""
    spacing = FleetSpacing(url)

    async def scenario():
        assert await spacing.acquire("a.example", 0.5, 30) == 0
        await spacing.release("a.example", 0.5)
        await asyncio.sleep(await spacing.acquire("a.example", 0.5, 30))
        assert await spacing.acquire("a.example", 0.5, 30) == 0
        spacing.close()

    await on_loop(scenario())
    # On the server's clock: the last hold began (busy - lease) at least the floor
    # after the released request ended.
    record = redis.Redis.from_url(url).hgetall("rfc9309:spacing:{a.example}")
    granted = (int(record[b"busy"]) - 30_000_000) / 1e6
    assert granted - int(record[b"end"]) / 1e6 >= 0.5


@pytest_twisted.ensureDeferred
async def test_an_unreachable_redis_is_a_spacing_error(silent_port):
    spacing = FleetSpacing(f"redis://127.0.0.1:{silent_port}/0", timeout=0.3)

    async def scenario():
        with pytest.raises(SpacingError):
            await spacing.acquire("a.example", 1.0, 30)
        spacing.close()

    await on_loop(scenario())


@pytest_twisted.ensureDeferred
async def test_a_lock_left_by_a_dead_process_expires_and_publishing_releases_it(url):
    shared = SharedRobots(url)

    async def lock(seconds):
        return (await shared.read_or_lock("http://a.example", seconds))[2]

    async def scenario():
        dead = await lock(0.3)  # a process killed mid-fetch
        assert dead is not None
        assert await lock(0.3) is None
        await asyncio.sleep(0.4)
        token = await lock(5)
        assert token is not None  # expired: another process may fetch
        fetch = SharedFetch("success", 200, b"User-agent: *\nDisallow: /x\n", ttl=60)
        await shared.publish("http://a.example", fetch, token)
        found, _, _ = await shared.read_or_lock("http://a.example", 5)
        shared.close()
        return found

    found = await on_loop(scenario())
    assert (found.outcome, found.status, found.body) == (
        "success",
        200,
        b"User-agent: *\nDisallow: /x\n",
    )
    assert 55 < found.ttl <= 60
    lock_key = "rfc9309:robots:lock:{a.example}:http://a.example"
    assert not redis.Redis.from_url(url).exists(lock_key)  # publishing released it


def test_a_shared_fetch_keeps_the_cause_of_a_failed_redirect():
    # Fleet readers report "redirect loop" as the fetching process does, not "network error".
    fetch = SharedFetch("unavailable", None, None, ttl=60, reason="redirect loop")
    assert SharedFetch.decode(fetch.encode().encode(), 60).reason == "redirect loop"
    # A record written without the field (by an older version) still decodes.
    old = b'{"outcome": "unavailable", "status": 404, "body": null}'
    assert SharedFetch.decode(old, 60) == SharedFetch("unavailable", 404, None, 60)


@pytest_twisted.ensureDeferred
async def test_the_fleet_keeps_robots_txt_results_and_drops_what_does_not_read_back(url):
    from scrapy_rfc9309.robots._stored import RedisRobotsStore, StoredRobots

    store = RedisRobotsStore(url, max_bytes=1000)
    record = StoredRobots("success", 200, b"User-agent: *\nDisallow: /x\n", 1e9, 3600.0, '"v1"')

    async def scenario():
        await store.put("http://a.example", record)
        await store.put("http://b.example", record)
        await store.put("http://c.example", StoredRobots("success", 200, b"x" * 1002, 1e9, 1.0))
        server = redis.Redis.from_url(url)
        server.set("rfc9309:robots-kept:{b.example}:http://b.example", b'{"version": 1, "body"')
        read = [await store.get(f"http://{name}.example") for name in "abcd"]
        left = server.exists(
            *(f"rfc9309:robots-kept:{{{n}.example}}:http://{n}.example" for n in "bc")
        )
        server.close()
        await store.close()
        return read, left

    read, left = await on_loop(scenario())
    assert read == [record, None, None, None]  # damaged JSON, over the size limit, none
    assert left == 0  # the unreadable ones are deleted


@pytest_twisted.ensureDeferred
async def test_the_shared_queue_keeps_a_host_held_when_its_list_empties_and_refills(url):
    """A request pushed for a host whose only request is out waits for that one to
    end (a host whose floor is not known yet goes one at a time, fleet-wide)."""
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler
    from scrapy_redis import picklecompat

    from scrapy_rfc9309.extensions.crawldelay._politeness import politeness
    from scrapy_rfc9309.redisqueue import HostReadyRedisQueue

    crawler = get_crawler()
    crawler.spider = Spider.from_crawler(crawler, "queue")
    server = redis.Redis.from_url(url)
    politeness(crawler).tracking = True  # as the gate does: it sees every end
    queue = HostReadyRedisQueue(server, crawler.spider, "q", picklecompat)
    queue.clear()  # an earlier run's process would own units pushed here
    queue.push(Request("http://a.example/1", meta={"download_slot": "a.example"}))
    await on_loop(told(queue))
    first = queue.pop()
    assert first.url == "http://a.example/1"  # the host's list is now empty
    queue.push(Request("http://a.example/2", meta={"download_slot": "a.example"}))
    queue.push(Request("http://b.example/1", meta={"download_slot": "b.example"}))
    await on_loop(told(queue))
    assert queue.pop().url == "http://b.example/1"
    assert queue.pop() is None  # a.example is held until /1 ends
    politeness(crawler).finished(first, reached=True)  # it ended: ready again (no floor)
    await on_loop(told(queue))  # the end is told to Redis asynchronously
    assert queue.pop().url == "http://a.example/2"
    await on_loop(queue.close())


@pytest_twisted.ensureDeferred
async def test_the_shared_queue_hands_a_units_requests_out_in_scrapys_order(url):
    """Within a unit, requests leave as from Scrapy's own queues and scrapy-redis's
    ``PriorityQueue``: the highest priority first (a redirect's +2 before, a retry's
    -1 after), and first in, first out among equals."""
    from scrapy import Request

    queue = shared_queue(url, "order")
    queue.clear()
    pushed = [("/1", 0), ("/2", 5), ("/3", -1), ("/4", 2), ("/5", 0), ("/6", 5), ("/7", -1)]
    for path, priority in pushed:
        queue.push(Request(f"http://a.example{path}", priority=priority))
    await on_loop(told(queue))
    popped = [queue.pop() for _ in pushed]  # no floor, no gate: none is held
    assert [request.url[-2:] for request in popped] == ["/2", "/6", "/4", "/1", "/5", "/3", "/7"]
    assert [request.priority for request in popped] == [5, 5, 2, 0, 0, -1, -1]
    await on_loop(queue.close())


class Counting(redis.Redis):
    """redis-py's client, counting the script calls it blocks for."""

    calls = 0

    def execute_command(self, *args, **options):
        if args[0] in ("EVALSHA", "EVAL"):  # the scripts; loading one is not a call
            Counting.calls += 1
        return super().execute_command(*args, **options)


@pytest_twisted.ensureDeferred
async def test_the_shared_queue_blocks_for_a_pop_a_request_and_for_nothing_else(url):
    """Each synchronous call of the queue blocks the reactor for a round trip: a
    request costs its pop; its push and its end are sent through the pipelined
    asynchronous connection (the end, without an event loop, with the next pop)."""
    from scrapy import Request

    queue = shared_queue(url, "calls", Counting.from_url(url))
    queue.clear()
    polite = queue.politeness
    polite.tracking = True  # as the gate does: it sees every end
    polite.limit_by(Floor(0.001))  # every end is told: the unit is ready 1 ms later

    async def crawl(requests):
        for n in range(requests):
            queue.push(Request(f"http://a.example/{n}", meta={"download_slot": "a.example"}))
        for _ in range(requests):
            await told(queue)
            await asyncio.sleep(0.002)  # the unit's 1 ms floor passed
            request = queue.pop()
            assert request is not None
            polite.finished(request, reached=True)

    await on_loop(crawl(1))  # warm up: a script's first call loads it and calls again
    Counting.calls = 0
    await on_loop(crawl(10))
    await on_loop(told(queue))
    assert queue.pop() is None
    assert Counting.calls == 10 + 1  # the pops, the last pop that found none
    await on_loop(queue.close())
    queue.clear()


@pytest_twisted.ensureDeferred
async def test_a_pop_holds_a_floored_units_record_in_the_ledger_until_its_request_ends(url):
    """A pop of a unit whose floor the queue knows holds the unit's record in the
    fleet's ledger in the same call: another process's gate waits for it, and the
    request's end, told by the queue, lets it go, the floor counting from then.  A
    unit whose floor is not known yet is not held there (its robots.txt, fetched
    through the gate, must not wait for its page)."""
    from scrapy_rfc9309.extensions.crawldelay._politeness import politeness

    queue = shared_queue(url, "held")
    queue.clear()
    polite = politeness(queue.crawler)
    polite.tracking = True  # as the gate does: it sees every end
    polite.limit_by(Floor(0.3))
    spacing = FleetSpacing(url)
    push_for(queue, "a.example")
    push_for(queue, "a.example")

    async def scenario():
        await told(queue)
        first = queue.pop()  # the floor not known yet: the record stays free
        free = await spacing.acquire("a.example", 0.0, 30, "robots")
        await spacing.release("a.example", 0.0, "robots")
        polite.finished(first, reached=True)  # told with its floor
        await asyncio.sleep(0.35)
        second = queue.pop()
        while_held = await spacing.acquire("a.example", 0.3, 30, "other")
        polite.finished(second, reached=True)
        await told(queue)
        after_end = await spacing.acquire("a.example", 0.3, 30, "other")
        await queue.close()
        spacing.close()
        return first, second, free, while_held, after_end

    first, second, free, while_held, after_end = await on_loop(scenario())
    assert first is not None and second is not None
    assert free == 0
    assert while_held > 0
    assert after_end > 0.2  # the floor after the popped request's end


@pytest_twisted.ensureDeferred
async def test_a_unit_the_fleet_may_hold_for_a_process_is_let_go_of_once_redis_answers(
    url, monkeypatch
):
    """Two ways a process holds a unit in Redis without a release getting there:
    Redis answered an acquisition too late (it ran it after the call gave up: the
    process admitted its request by itself), and a request ended while Redis could
    not be told.  Each is let go of with its token once Redis answers, with no other
    call of the process's (it may have no floored request left to start); else the
    fleet would wait for both units until their lease ends."""
    from scrapy.utils.test import get_crawler

    from scrapy_rfc9309.extensions.crawldelay._fleet import FleetGates
    from scrapy_rfc9309.fleet import health
    from tests.delay_proxy import DelayProxy

    monkeypatch.setattr(health, "RETRY_AFTER", 0.1)  # the pause after a failure
    server = redis.Redis.from_url(url)
    port, db = server.connection_pool.connection_kwargs["port"], url.rsplit("/", 1)[1]
    proxy = DelayProxy(("127.0.0.1", port), rtt=0)
    gates = FleetGates(get_crawler(), f"redis://127.0.0.1:{proxy.port}/{db}", lease=60)

    async def scenario():
        assert await gates.acquire("ended.example", 0.5) == 0  # held for this process
        proxy.delay = 1.5  # Redis runs the next call at 1.5 s, its answer is due at 3
        assert await gates.acquire("late.example", 0.5) == 0  # gave up at 2 s: admitted
        proxy.delay = 0
        gates.release("ended.example", 0.5)  # cannot be told yet
        gates.release("late.example", 0.5)
        deadline = time.monotonic() + 5  # well before the leases end (60 s)
        while time.monotonic() < deadline and not all(map(free, units)):
            await asyncio.sleep(0.05)
        records = [server.hgetall(f"rfc9309:spacing:{{{unit}}}") for unit in units]
        await gates.close()
        return records

    def free(unit):
        busy = server.hget(f"rfc9309:spacing:{{{unit}}}", "busy")
        return busy is not None and int(busy) / 1e6 <= server.time()[0] + 1

    units = ("ended.example", "late.example")
    records = await on_loop(scenario())
    now = server.time()
    for unit, record in zip(units, records, strict=True):
        assert record[b"owner"].startswith(gates._token.encode()), record
        assert int(record[b"busy"]) / 1e6 <= now[0] + 1, (unit, record)  # let go of


def test_an_answer_to_a_call_asked_before_redis_failed_does_not_say_it_answers_again(caplog):
    """Calls in flight when Redis goes: one fails (WARNING: unreachable), and one
    answered before the server closed is read after it.  That answer says nothing of
    Redis since: saying "answers again" then, the process said "unreachable" a
    second time at the next failure (seen with Scrapy 2.15, two lines each way)."""
    import logging
    from time import monotonic

    from scrapy.utils.test import get_crawler

    from scrapy_rfc9309.fleet.health import fleet_health

    health = fleet_health(get_crawler())
    with caplog.at_level(logging.WARNING):
        asked_before = monotonic()
        health.failed(OSError("closed"), "fleet/test_error")
        health.answered(asked_before)  # asked before the failure: says nothing
        health.failed(OSError("closed"), "fleet/test_error")
        health.answered(monotonic())  # asked after it: Redis answers again
    lines = [record.getMessage() for record in caplog.records]
    assert [line.split(" (")[0].split(":")[0] for line in lines] == [
        "Fleet Redis unreachable",
        "Fleet Redis answers again",
    ], lines


@pytest_twisted.ensureDeferred
async def test_the_live_view_counts_the_requests_in_the_fleets_queue(url, caplog):
    """A process whose fleet's queue holds requests that are not ready for it (held
    by other processes, or another's to take) says so in its live view line: not
    just "0 units ready, 0 in progress"."""
    import logging

    from scrapy import Spider
    from scrapy.utils.test import get_crawler
    from scrapy_redis import picklecompat

    from scrapy_rfc9309.extensions.crawldelay import CrawlDelayThrottle
    from scrapy_rfc9309.redisqueue import HostReadyRedisQueue

    crawler = get_crawler(settings_dict={"CRAWLDELAY_ENABLED": True})
    throttle = CrawlDelayThrottle.from_crawler(crawler)
    assert "crawldelay/fleet_queue_left" not in throttle.live_view()  # no shared queue
    crawler.spider = Spider.from_crawler(crawler, "queue")
    queue = HostReadyRedisQueue(redis.Redis.from_url(url), crawler.spider, "view", picklecompat)
    queue.clear()
    push_for(queue, "a.example")
    push_for(queue, "b.example")

    async def scenario():
        await told(queue)
        await queue.close()

    await on_loop(scenario())
    with caplog.at_level(logging.INFO):
        throttle.log_live_view()
    assert crawler.stats.get_value("crawldelay/fleet_queue_left") == 2
    assert "0 units ready, 0 in progress" in caplog.text
    assert "2 requests in the fleet's queue" in caplog.text


def shared_queue(url, key, server=None):
    """A ``HostReadyRedisQueue`` of a crawler of its own, as one process of a fleet
    (on *server*, a redis-py client, else one for *url*)."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler
    from scrapy_redis import picklecompat

    from scrapy_rfc9309.redisqueue import HostReadyRedisQueue

    crawler = get_crawler()
    crawler.spider = Spider.from_crawler(crawler, "queue")
    server = server or redis.Redis.from_url(url)
    return HostReadyRedisQueue(server, crawler.spider, key, picklecompat)


async def told(queue):
    """Wait for what the queue sends Redis in the background (pushes, the ends of
    requests) to be answered: on a loaded machine, later than any fixed pause."""
    await queue.flush()


def push_for(queue, host):
    from scrapy import Request

    queue.push(Request(f"http://{host}/", meta={"download_slot": host}))


@pytest.mark.parametrize("floor", [0.0, 0.001])
@pytest_twisted.ensureDeferred
async def test_the_shared_queue_keeps_nothing_of_a_unit_it_is_done_with(url, floor):
    """A broad crawl's shared queue costs Redis no memory per unit crawled: once a
    unit's requests ended and a later pop met it with none left, none of the queue's
    keys holds anything of it (its place, owner, floor), floored or not; and meeting
    many such units does not delay the next request."""
    queue = shared_queue(url, "done")
    queue.clear()
    polite = queue.politeness
    polite.tracking = True  # as the gate does: it sees every end
    polite.limit_by(Floor(floor))
    crawled = [f"u{n}.example" for n in range(250)]  # more than a pop looks at
    for unit in crawled:
        push_for(queue, unit)

    async def crawl(count):
        taken = []
        while len(taken) < count:
            await told(queue)
            await asyncio.sleep(0.01)  # a floor passed
            while (request := queue.pop()) is not None:
                taken.append(request)
                polite.finished(request, reached=True)
        return taken

    assert len(await on_loop(crawl(len(crawled)))) == len(crawled)
    push_for(queue, "next.example")  # the crawl goes on

    async def next_pop():
        await told(queue)
        await asyncio.sleep(0.01)  # the units done are ready: their floor passed
        return queue.pop()

    # A pop drops the units done that it meets, up to 200, and takes the new unit's
    # request, or has the process ask again at once (it looked at 20, then waited
    # for the others' grace: 2.5 s).
    request = await on_loop(next_pop()) or await on_loop(next_pop())
    assert request is not None and request.url == "http://next.example/"
    server = redis.Redis.from_url(url)
    units, _count, floors, owners = queue.keys[:4]
    kept = {name.decode() for name in server.zrange(units, 0, -1)}
    kept |= {name.decode() for name in server.hkeys(floors)}
    kept |= {name.decode() for name in server.hkeys(owners)}
    for owned in server.scan_iter(match=f"{owners}:*"):
        kept |= {name.decode() for name in server.zrange(owned, 0, -1)}
    assert kept <= {"next.example"}, sorted(kept)
    await on_loop(queue.close())


@pytest_twisted.ensureDeferred
async def test_a_unit_without_a_floor_pushed_again_after_it_was_dropped_goes_on_at_once(url):
    """A unit the queue dropped (done with) is new when pushed again: its floor not
    known, its first request holds it until its end is told, which the process tells
    (a unit without a floor whose end went untold was held for the lease, 185 s)."""
    from scrapy import Request

    queue = shared_queue(url, "again")
    queue.clear()
    polite = queue.politeness
    polite.tracking = True  # as the gate does: it sees every end

    async def take(path, more=()):
        """Pop /path of a.example (after *more* units' requests, each done)."""
        for _ in range(100):
            await told(queue)
            await asyncio.sleep(0.01)
            request = queue.pop()
            if request is not None:
                polite.finished(request, reached=True)
                if request.url.endswith(path):
                    return request
        return None

    popped = []
    for round_ in range(3):  # pushed, crawled, dropped by a later pop; again
        queue.push(Request(f"http://a.example/{round_}", meta={"download_slot": "a.example"}))
        queue.push(Request(f"http://a.example/{round_}b", meta={"download_slot": "a.example"}))
        popped.append(await on_loop(take(f"/{round_}")))
        popped.append(await on_loop(take(f"/{round_}b")))
        push_for(queue, f"other{round_}.example")  # its pop meets a.example, done with
        await on_loop(take(f"other{round_}.example/"))
    assert all(request is not None for request in popped), popped
    await on_loop(queue.close())


@pytest_twisted.ensureDeferred
async def test_the_shared_queue_finds_a_process_s_ready_unit_behind_many_of_another_s(
    url, monkeypatch
):
    """A pop looks at this process's own units first, then at those ready for the
    grace that their owner did not take: however many of another process's ready
    units come before it, a process's own ready unit is found, and the other's are
    left to their owner (for a grace longer than a loaded machine's pauses)."""
    from scrapy_rfc9309.extensions.crawldelay import _redisqueue

    monkeypatch.setattr(_redisqueue, "GRACE", 30.0)
    first = shared_queue(url, "own")
    first.clear()  # the only process seen: it owns what it pushes now
    for n in range(40):
        push_for(first, f"first-{n}.example")
    await on_loop(told(first))
    second = shared_queue(url, "own")  # seen from now on: new units go to the two in turn
    push_for(first, "a.example")
    push_for(first, "b.example")
    await on_loop(told(first))
    # One of the two is its own (in turn), behind 40 of the other's ready units.
    assert second.pop().url in ("http://a.example/", "http://b.example/")
    assert second.pop() is None  # the other's, not taken before their grace ends
    assert first.pop().url == "http://first-0.example/"
    for each in (first, second):
        await on_loop(each.close())
    first.clear()


@pytest_twisted.ensureDeferred
async def test_an_unreachable_robots_txt_takes_the_requests_it_refuses_out_of_redis_at_once(url):
    """When a robots.txt this process reads is unreachable (everything disallowed),
    its unit's requests leave Redis at once, whatever the unit's readiness (here, held
    by the request that fetched it): those the robots.txt refuses are handed out to
    be dropped, those of the unit's other authority go back and wait for the unit."""
    from scrapy import Request

    from scrapy_rfc9309._shared import offers
    from scrapy_rfc9309.robots import FetchOutcome, RobotsEntry, Verdict

    queue = shared_queue(url, "refused")
    queue.clear()
    queue.politeness.tracking = True  # as the gate does: the unit is held while /0 is out
    for path in ("http://a.example/0", "http://a.example/1", "https://a.example/2"):
        queue.push(Request(path, meta={"download_slot": "a.example"}))
    await on_loop(told(queue))
    assert queue.pop().url == "http://a.example/0"  # out: its robots.txt is fetched
    assert queue.pop() is None  # the unit is held until /0 ends
    shared = offers(queue.crawler)
    shared.robots_refuses = lambda request: request.url.startswith("http://")
    unreachable = RobotsEntry(
        FetchOutcome.UNREACHABLE, None, 0.0, 600.0, Verdict(False, "robots.txt unreachable")
    )
    for decided in shared.on_robots_decided:
        decided("http://a.example", unreachable)
    await on_loop(told(queue))
    assert queue.pop().url == "http://a.example/1"  # refused: at once, while held
    assert queue.pop() is None  # https://a.example/2 waits for the unit, in Redis
    assert int(queue.server.get(queue.keys[1])) == 1
    await on_loop(queue.close())
    queue.clear()


@pytest_twisted.ensureDeferred
async def test_a_shared_queue_that_closes_leaves_the_fleet_at_once(url):
    """A process whose crawl closes is given no new unit from then on: the units
    pushed after it closed all go to the process still there (counted as there for
    its SEEN seconds more, it would have been given every other one)."""
    first = shared_queue(url, "leave")
    first.clear()
    assert first.pop() is None  # seen: it called
    second = shared_queue(url, "leave")
    await on_loop(first.close())
    for n in range(4):
        push_for(second, f"{n}.example")
    await on_loop(told(second))
    taken = [second.pop() for _ in range(4)]
    assert None not in taken
    await on_loop(second.close())
    second.clear()


@pytest_twisted.ensureDeferred
async def test_a_shared_queue_an_earlier_version_left_is_taken_over_with_every_request(url):
    """Version 0.1 named the shared queue's keys after hosts (``:hosts``,
    ``:host:{unit}``) and kept each one's requests in a list.  A fleet stopped and
    started again on this version finds its queue: the first process to open it
    renames the old keys (``:units``, ``:unit:{unit}``), each list a sorted set,
    and every request queued is still there, in its order (at priority 0: the
    lists kept none), before those pushed since at the same priority."""
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler
    from scrapy_redis import picklecompat

    from scrapy_rfc9309.redisqueue import HostReadyRedisQueue

    def opened():
        crawler = get_crawler()
        crawler.spider = Spider.from_crawler(crawler, "queue")
        return HostReadyRedisQueue(server, crawler.spider, "old", picklecompat)

    server = redis.Redis.from_url(url)
    hosts = ("a.example", "b.example")
    queue = opened()
    queue.clear()
    await on_loop(queue.close())
    for host in hosts:  # as version 0.1 left them: a list a host, the hosts by time
        for n in range(2):
            request = Request(f"http://{host}/{n}", meta={"download_slot": host})
            server.rpush(f"old:host:{host}", queue._encode(request))
        server.zadd("old:hosts", {host: 0})
    server.set("old:count", 4)
    server.delete("old:pushed")  # 0.1 did not keep it
    taken_over = opened()
    assert len(taken_over) == 4
    assert not server.exists("old:hosts", *(f"old:host:{host}" for host in hosts))
    assert all(server.type(f"old:unit:{host}") == b"zset" for host in hosts)
    taken_over.push(Request("http://a.example/new", meta={"download_slot": "a.example"}))
    await on_loop(told(taken_over))
    await on_loop(asyncio.sleep(2.6))  # the units' owner is gone: theirs after the grace
    urls = []
    while (request := taken_over.pop()) is not None:
        urls.append(request.url)
        taken_over.politeness.finished(request, reached=True)  # a unit's next may go
        await on_loop(told(taken_over))
    assert sorted(urls) == sorted(
        [f"http://{h}/{n}" for h in hosts for n in range(2)] + ["http://a.example/new"]
    )
    assert [url for url in urls if "a.example" in url] == [
        "http://a.example/0",
        "http://a.example/1",
        "http://a.example/new",
    ]
    await on_loop(taken_over.close())


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_while_redis_is_away_the_shared_queue_crawls_what_it_schedules_and_shares_the_rest():
    """Redis stops: the queue's count stays the last one seen (not empty), a request
    scheduled meanwhile is handed out here, and one not handed out yet is pushed when
    Redis answers again, with what Redis kept."""
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler
    from scrapy_redis import picklecompat

    from scrapy_rfc9309.redisqueue import HostReadyRedisQueue
    from tests.budget.redis_server import RedisServer

    redis_server = RedisServer(durable=True)
    crawler = get_crawler()
    crawler.spider = Spider.from_crawler(crawler, "queue")
    queue = HostReadyRedisQueue(
        redis.Redis.from_url(redis_server.url), crawler.spider, "away", picklecompat
    )
    try:
        queue.push(Request("http://a.example/1", meta={"download_slot": "a.example"}))
        await on_loop(told(queue))
        assert len(queue) == 1
        redis_server.stop()
        await on_loop(asyncio.sleep(0.6))  # the count seen is no longer fresh
        assert len(queue) == 1  # Redis cannot say: not empty
        queue.push(Request("http://b.example/1", meta={"download_slot": "b.example"}))
        queue.push(Request("http://c.example/1", meta={"download_slot": "c.example"}))
        assert queue.pop().url == "http://b.example/1"  # kept here, handed out here
        assert len(queue) == 2  # a.example/1 in Redis, c.example/1 here
        redis_server.restart()
        await on_loop(asyncio.sleep(1.5))  # a PING answers within a second
        urls = {queue.pop().url}  # the pop that finds Redis back shares c.example/1
        await on_loop(asyncio.sleep(0.05))
        urls.add(queue.pop().url)
        assert urls == {"http://a.example/1", "http://c.example/1"}
        assert crawler.stats.get_value("fleet/queue_unreachable") >= 1
    finally:
        await on_loop(queue.close())
        redis_server.stop()


@pytest.mark.redis
def test_the_dupefilter_lets_unchecked_requests_through_once_and_adds_them_when_redis_answers(
    monkeypatch,
):
    """While Redis is away, a new request goes through (scrapy-redis's own dupefilter
    raises: its scheduler loses it), a second one for it is a duplicate, Redis is
    asked again only after ``RETRY``; the first check that reaches Redis again adds
    the fingerprints let through meanwhile to the fleet's set."""
    from scrapy import Request

    from scrapy_rfc9309 import dupefilter
    from tests.budget.redis_server import RedisServer

    monkeypatch.setattr(dupefilter, "RETRY", 0.3)
    server = RedisServer(durable=True)
    try:
        client = redis.Redis.from_url(server.url)
        seen = dupefilter.RedisDupeFilter(client, "fleet:dupefilter").request_seen
        pages = [Request(f"http://a.example/{n}") for n in range(4)]
        assert [seen(pages[0]), seen(pages[0])] == [False, True]
        server.stop()
        assert [seen(pages[1]), seen(pages[1]), seen(pages[0])] == [False, True, False]
        server.restart()
        assert seen(pages[2]) is False  # within RETRY: Redis not asked
        assert client.scard("fleet:dupefilter") == 1
        time.sleep(0.3)
        assert seen(pages[3]) is False
        assert client.scard("fleet:dupefilter") == 4
        assert [seen(page) for page in pages] == [True] * 4
    finally:
        server.stop()


@pytest.mark.redis
@pytest_twisted.ensureDeferred
async def test_the_dupefilter_takes_a_redis_refusing_writes_as_away_and_adds_at_close(caplog):
    """Redis out of memory (``maxmemory`` 1 byte, ``noeviction``) refuses the
    dupefilter's writes: a new request goes through, as while Redis is away (raised,
    the error would end one of Scrapy's tasks for the page's output).  When the crawl
    closes, what it let through is added to the fleet's set if Redis takes it then;
    if not, a WARNING says so and it is kept for the next try."""
    from scrapy import Request

    from scrapy_rfc9309.dupefilter import RedisDupeFilter
    from tests.budget.redis_server import RedisServer

    server = RedisServer()
    try:
        client = redis.Redis.from_url(server.url)
        dupefilter = RedisDupeFilter(client, "fleet:dupefilter")
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)
        pages = [Request(f"http://a.example/{n}") for n in range(2)]
        assert [dupefilter.request_seen(page) for page in pages] == [False, False]
        assert dupefilter.request_seen(pages[0]) is True  # remembered here
        await on_loop(dupefilter.send_unsent())  # refused again
        assert "not in its set (command not allowed when used memory" in caplog.text
        client.config_set("maxmemory", 0)
        await on_loop(dupefilter.send_unsent())
        assert client.scard("fleet:dupefilter") == 2
    finally:
        server.stop()


@pytest.mark.parametrize(
    "host, options",
    [
        ("localhost", "ssl_ca_certs={cert}"),
        # As hosted Redis services are often used; here at an address the
        # certificate does not name.
        ("127.0.0.1", "ssl_cert_reqs=none"),
    ],
    ids=["private-ca", "no-certificate-check"],
)
@pytest_twisted.ensureDeferred
async def test_a_tls_redis_is_reached_with_redis_pys_tls_options(tls_redis, host, options):
    """rediss:// with redis-py's TLS options: the fleet's spacing reaches the server,
    and the shared queue sends its pushes and ends without blocking, as over plain
    TCP (a pop is its one blocking call)."""
    port, cert = tls_redis
    url = f"rediss://{host}:{port}/0?{options.format(cert=cert)}"
    spacing = FleetSpacing(url, timeout=5)

    async def acquire():
        try:
            return await spacing.acquire("b.example", 1.0, 30)
        finally:
            spacing.close()

    assert await on_loop(acquire()) == 0
    queue = shared_queue(url, "tls", Counting.from_url(url))
    queue.politeness.tracking = True
    Counting.calls = 0
    push_for(queue, "a.example")
    await on_loop(told(queue))
    assert Counting.calls == 0  # pushed through the asynchronous connection
    request = queue.pop()
    assert request is not None and request.url == "http://a.example/"
    queue.politeness.finished(request, reached=True)
    await on_loop(told(queue))
    assert Counting.calls == 1  # the pop; the end went without blocking
    await on_loop(queue.close())


@pytest_twisted.ensureDeferred
async def test_clearing_the_shared_queue_leaves_no_key_of_it(url):
    """scrapy-redis's ``SCHEDULER_FLUSH_ON_START`` clears the queue (its ``clear``):
    no key of the shared queue is left, whatever its units, owners, wake lists and
    taken requests."""
    first, second = shared_queue(url, "flush"), shared_queue(url, "flush")
    for host in ("a.example", "b.example", "c.example", "d.example"):
        push_for(first, host)
    await on_loop(told(first))
    assert first.pop() is not None or second.pop() is not None
    server = redis.Redis.from_url(url)
    assert len(server.keys("flush:*")) > 5
    first.clear()
    assert server.keys("flush:*") == []
    await on_loop(first.close())
    await on_loop(second.close())


@pytest_twisted.ensureDeferred
async def test_a_pop_does_not_wait_scrapy_redis_idle_before_close(url):
    """scrapy-redis passes ``SCHEDULER_IDLE_BEFORE_CLOSE`` to a pop as a timeout
    (its queues block on Redis that long, with ``BRPOP`` and the like): the shared
    queue's pop sends no blocking command, on the reactor thread."""

    class Recording(redis.Redis):
        sent: list[str] = []

        def execute_command(self, *args, **options):
            Recording.sent.append(str(args[0]).upper())
            return super().execute_command(*args, **options)

    queue = shared_queue(url, "idle", Recording.from_url(url))
    Recording.sent.clear()
    assert queue.pop(timeout=30) is None
    blocking = {"BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BLMPOP", "BZPOPMIN", "BZPOPMAX"}
    assert Recording.sent and not blocking & set(Recording.sent)
    await on_loop(queue.close())


@pytest_twisted.ensureDeferred
async def test_without_an_asynchronous_connection_the_shared_queue_blocks_and_loses_nothing(url):
    """A redis-py connection the package's asynchronous client does not mirror (here
    a connection class of the project's own): the queue's pushes are blocking calls,
    and each request's end is told with the next pop, so a floored unit's next
    request still comes once the one before it ended."""
    from scrapy import Request

    class OwnConnection(redis.Connection):
        pass

    pool = redis.ConnectionPool.from_url(url, connection_class=OwnConnection)
    queue = shared_queue(url, "blocking", Counting(connection_pool=pool))
    polite = queue.politeness
    polite.tracking = True
    polite.limit_by(Floor(0.001))
    Counting.calls = 0
    for n in range(2):
        queue.push(Request(f"http://a.example/{n}", meta={"download_slot": "a.example"}))
    assert Counting.calls == 2  # each push, blocking
    first = queue.pop()
    assert first is not None
    assert queue.pop() is None  # the unit is held until the first one ends
    polite.finished(first, reached=True)
    assert Counting.calls == 4  # its end waits for the next pop
    await on_loop(asyncio.sleep(0.01))  # the 1 ms floor passed
    second = queue.pop()
    assert second is not None and second.url != first.url
    assert Counting.calls == 5
    await on_loop(queue.close())
    queue.clear()
