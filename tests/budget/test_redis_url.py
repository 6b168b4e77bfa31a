"""The Redis URL forms the pipelined client takes (redis-py's), and the fallback."""

import logging
import ssl

import pytest

from scrapy_rfc9309._redis import address_from_url, unknown_options
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


@pytest.mark.parametrize(
    "query, verify, check_hostname",
    [
        ("", ssl.CERT_REQUIRED, True),
        # Hosted Redis services with their own certificates ask for this one.
        ("?ssl_cert_reqs=none", ssl.CERT_NONE, False),
        ("?ssl_cert_reqs=optional&ssl_check_hostname=false", ssl.CERT_OPTIONAL, False),
        ("?ssl_check_hostname=False", ssl.CERT_REQUIRED, False),
        ("?ssl_check_hostname=true&ssl_min_version=TLSv1_3", ssl.CERT_REQUIRED, True),
    ],
)
def test_rediss_urls_tls_options_are_applied_as_redis_py_applies_them(
    query, verify, check_hostname
):
    tls = address_from_url("rediss://h:6380/0" + query).tls
    assert tls.verify_mode == verify
    if query:  # without ssl_check_hostname, redis-py's default (True from 6.0)
        assert tls.check_hostname == check_hostname
    if "TLSv1_3" in query:
        assert tls.minimum_version == ssl.TLSVersion.TLSv1_3


def test_redis_pys_options_for_its_own_sockets_and_pool_change_nothing_here():
    url = (
        "redis://h/2?socket_timeout=5&socket_keepalive=true&health_check_interval=10&client_name=a"
    )
    address = address_from_url(url)
    # Every option the installed redis-py parses from a URL is applied here or one of
    # these, but the verify-flag TLS ones (redis-py 8).
    import redis.connection

    every = "&".join(f"{name}=1" for name in redis.connection.URL_QUERY_ARGUMENT_PARSERS)
    unmirrored = {"ssl_include_verify_flags", "ssl_exclude_verify_flags"}
    assert set(unknown_options(f"redis://h/0?{every}")) <= unmirrored
    assert (address.host, address.db, address.tls) == ("h", 2, None)
    assert unknown_options(url + "&readonly=true&ssl_validate_ocsp=true") == [
        "readonly",
        "ssl_validate_ocsp",
    ]


@pytest.mark.parametrize(
    "query, error",
    [("?ssl_cert_reqs=sometimes", "sometimes"), ("?ssl_ca_certs=/no/such.pem", "No such file")],
)
def test_a_malformed_tls_option_is_a_value_error_naming_it(query, error):
    with pytest.raises(ValueError, match=error) as raised:
        address_from_url("rediss://h" + query + "&ssl_password=s3cret")
    assert query.split("=")[0].strip("?") in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_options_it_does_not_handle_fall_back_to_redis_py_with_a_warning(redis_server, caplog):
    url = redis_server.url + "?ssl_validate_ocsp=true"
    with caplog.at_level(logging.WARNING):
        store = RedisStorage(url)
    assert not store.pipelined
    assert "worker thread" in caplog.text and "ssl_validate_ocsp=true" in caplog.text
    store.close()


def test_the_fleet_client_names_what_it_cannot_use_without_the_password():
    from scrapy_rfc9309.fleet import fleet_client

    with pytest.raises(ValueError, match="readonly") as raised:
        fleet_client("redis://u:s3cret@h/0?readonly=true", 1.0)
    assert "s3cret" not in str(raised.value)
    with pytest.raises(ValueError, match="scheme 'http'"):
        fleet_client("http://h/0", 1.0)


def test_a_bad_budget_redis_url_is_named_without_its_password():
    from scrapy_rfc9309.budget.storage import StorageError

    with pytest.raises(StorageError, match="bad URL redis://h:notaport/0") as raised:
        RedisStorage("redis://u:s3cret@h:notaport/0")
    assert "s3cret" not in str(raised.value)
