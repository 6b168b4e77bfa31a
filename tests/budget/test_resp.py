"""The pipelined Redis client: RESP parsing, and a real redis-server."""

import asyncio
import time
import uuid

import pytest
import pytest_twisted

from scrapy_rfc9309._redis import (
    _INCOMPLETE,
    PipelinedRedis,
    RedisAddress,
    RedisConnectionError,
    RedisReplyError,
    encode,
    parse,
)
from scrapy_rfc9309.budget.storage import RedisStorage, Reservation, StorageError
from tests.budget.redis_server import RedisServer
from tests.helpers import DAY, on_loop
from tests.server import refused_port

REPLIES = [
    (b":42\r\n", 42),
    (b":-1\r\n", -1),
    (b"+OK\r\n", "OK"),
    (b"$5\r\nhe\r\no\r\n", b"he\r\no"),  # a bulk string may hold CRLF
    (b"$0\r\n\r\n", b""),
    (b"$-1\r\n", None),
    (b"*3\r\n:1\r\n$1\r\na\r\n*1\r\n+x\r\n", [1, b"a", ["x"]]),
    (b"*-1\r\n", None),
]


@pytest.mark.parametrize(("wire", "reply"), REPLIES)
def test_parse_every_reply_kind_and_wait_for_the_rest_at_every_cut(wire, reply):
    assert parse(wire + b"+next\r\n") == (reply, len(wire))
    for cut in range(len(wire)):
        assert parse(wire[:cut]) == (_INCOMPLETE, 0)


def test_a_server_still_loading_its_files_is_not_reachable_yet():
    # A restarted Redis answers LOADING until it has read its files: away, not wrong.
    error, _ = parse(b"-LOADING Redis is loading the dataset in memory\r\n")
    assert isinstance(error, RedisConnectionError) and str(error).startswith("LOADING")


def test_parse_an_error_reply_as_an_exception_value():
    error, end = parse(b"-NOSCRIPT No matching script\r\n")
    assert isinstance(error, RedisReplyError) and str(error) == "NOSCRIPT No matching script"
    assert end == 30


def test_parse_rejects_what_is_not_resp():
    with pytest.raises(ValueError, match="not a RESP reply"):
        parse(b"HTTP/1.1 200 OK\r\n")


def test_encode_is_an_array_of_bulk_strings():
    assert encode(("SET", b"k", 7)) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n7\r\n"


def client_for(server, **options):
    return PipelinedRedis(RedisAddress(host="127.0.0.1", port=server.port, **options))


@pytest_twisted.ensureDeferred
async def test_replies_of_concurrent_calls_reach_their_callers_in_order(redis_server):
    client = client_for(redis_server)
    key = f"resp-{uuid.uuid4().hex}"

    async def scenario():
        # Sent before any reply arrives: each INCR's reply is its own count.
        counts = await asyncio.gather(*(client.call("INCR", key) for _ in range(500)))
        echoed = await asyncio.gather(*(client.call("ECHO", str(n)) for n in range(100)))
        client.close()
        return counts, echoed

    counts, echoed = await on_loop(scenario())
    assert counts == list(range(1, 501))
    assert echoed == [str(n).encode() for n in range(100)]


@pytest_twisted.ensureDeferred
async def test_an_error_reply_fails_only_its_own_call(redis_server):
    client = client_for(redis_server)

    async def scenario():
        calls = [client.call("PING"), client.call("NOSUCHCOMMAND"), client.call("PING")]
        results = await asyncio.gather(*calls, return_exceptions=True)
        client.close()
        return results

    first, error, last = await on_loop(scenario())
    assert first == last == "PONG"
    assert isinstance(error, RedisReplyError) and "unknown command" in str(error)


@pytest_twisted.ensureDeferred
async def test_a_lost_connection_fails_the_calls_in_flight_and_the_next_call_reconnects(
    redis_server,
):
    client = client_for(redis_server)

    async def scenario():
        first_id = await client.call("CLIENT", "ID")
        in_flight = asyncio.ensure_future(client.call("BLPOP", f"never-{uuid.uuid4().hex}", 0))
        await asyncio.sleep(0.05)
        killer = client_for(redis_server)
        killed = await killer.call("CLIENT", "KILL", "ID", first_id)
        killer.close()
        with pytest.raises(RedisConnectionError, match="connection lost"):
            await in_flight
        second_id = await client.call("CLIENT", "ID")
        client.close()
        return killed, first_id, second_id

    killed, first_id, second_id = await on_loop(scenario())
    assert killed == 1 and second_id != first_id


@pytest_twisted.ensureDeferred
async def test_a_silent_server_times_out_and_a_refused_connection_fails(silent_port):
    client = PipelinedRedis(RedisAddress(host="127.0.0.1", port=silent_port, timeout=0.3))
    refused = PipelinedRedis(RedisAddress(host="127.0.0.1", port=refused_port(), timeout=0.3))

    async def scenario():
        start = time.monotonic()
        with pytest.raises(RedisConnectionError, match=r"no reply from Redis within 0\.3 s"):
            await asyncio.gather(client.call("PING"), client.call("PING"))
        waited = time.monotonic() - start
        with pytest.raises(RedisConnectionError, match="cannot connect"):
            await refused.call("PING")
        client.close()
        return waited

    assert await on_loop(scenario()) >= 0.25  # it waited for the timeout


@pytest.fixture(scope="module")
def redis_with_password():
    server = RedisServer(password="s3cret")
    yield server
    server.stop()


@pytest_twisted.ensureDeferred
async def test_logs_in_and_selects_the_database_from_the_storage_url(redis_with_password):
    port = redis_with_password.port
    store = RedisStorage(f"redis://:s3cret@127.0.0.1:{port}/3")
    wrong = RedisStorage(f"redis://:wrong@127.0.0.1:{port}/3")

    async def scenario():
        granted = await store.reserve_async("a.com", DAY, 0, 0)
        with pytest.raises(StorageError, match="refused the login"):
            await wrong.reserve_async("a.com", DAY, 0, 0)
        await store.close_async()
        return granted

    assert await on_loop(scenario()) is Reservation.GRANTED
    assert store.usage(DAY) == {"a.com": (1, 1)}
    assert store.client.connection_pool.connection_kwargs["db"] == 3
    store.close()


@pytest_twisted.ensureDeferred
async def test_scripts_flushed_from_the_server_are_sent_again(redis_server):
    store = RedisStorage(redis_server.url, prefix=f"flush-{uuid.uuid4().hex}")

    async def scenario():
        first = await store.reserve_async("a.com", DAY, 0, 0)
        store.client.script_flush()
        second = await store.reserve_async("a.com", DAY, 0, 0)  # NOSCRIPT, then EVAL
        await store.close_async()
        return first, second

    assert await on_loop(scenario()) == (Reservation.GRANTED, Reservation.GRANTED)
    assert store.usage(DAY) == {"a.com": (2, 2)}
    store.close()


@pytest.mark.redis  # starts a redis-server of its own
@pytest_twisted.ensureDeferred
async def test_closing_while_connecting_leaves_no_connection():
    server = RedisServer()  # its own server: the only clients are this test's
    client = client_for(server)

    async def scenario():
        call = asyncio.ensure_future(client.call("PING"))
        await asyncio.sleep(0)  # the connection is being made
        client.close()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(0.2)  # time for a connection made anyway to reach the server

    try:
        await on_loop(scenario())
        import redis

        checker = redis.Redis.from_url(server.url)
        # A connection left open stays; the server may take a moment to see one that
        # was closed (redis-server's own start-up probe, on a loaded machine).
        deadline = time.monotonic() + 5
        while True:
            clients = [entry["cmd"] for entry in checker.client_list()]
            if clients == ["client|list"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        checker.close()
    finally:
        server.stop()
    assert clients == ["client|list"]  # the checker alone
