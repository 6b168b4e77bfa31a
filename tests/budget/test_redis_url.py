"""The Redis URL forms the pipelined client takes (redis-py's), and the fallback."""

import logging

import pytest

from scrapy_rfc9309._redis import address_from_url
from scrapy_rfc9309.budget.storage import RedisStorage


@pytest.mark.parametrize(
    "url, expected",
    [
        ("redis://localhost:6379/0", ("localhost", 6379, None, None, None, 0, False)),
        ("redis://:s3cret@h:1/3", ("h", 1, None, None, "s3cret", 3, False)),
        # A user name without a password: no login, as redis-py does.
        ("redis://user@h", ("h", 6379, None, "user", None, 0, False)),
        ("rediss://u:p%40ss@h/2", ("h", 6379, None, "u", "p@ss", 2, True)),
        ("unix:///tmp/r.sock?db=4", ("localhost", 6379, "/tmp/r.sock", None, None, 4, False)),
    ],
)
def test_url_forms(url, expected):
    address = address_from_url(url, 5.0)
    got = (address.host, address.port, address.path, address.username, address.password)
    assert (*got, address.db, address.tls is not None) == expected


def test_options_it_does_not_handle_fall_back_to_redis_py_with_a_warning(redis_server, caplog):
    url = redis_server.url + "?health_check_interval=10"
    with caplog.at_level(logging.WARNING):
        store = RedisStorage(url)
    assert store._pipe is None
    assert "worker thread" in caplog.text and "health_check_interval=10" in caplog.text
    store.close()
