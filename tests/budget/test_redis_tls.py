"""The pipelined Redis client over TLS (``rediss://``) against a real redis-server
started with ``--tls-port``, its certificate checked with the default rules."""

import pytest
import pytest_twisted

from scrapy_rfc9309.budget.storage import RedisStorage, Reservation, StorageError
from tests.helpers import DAY, on_loop


@pytest_twisted.ensureDeferred
async def test_reservations_over_tls_with_the_certificate_checked(tls_redis, monkeypatch):
    port, cert = tls_redis
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the default rules trust this CA
    store = RedisStorage(f"rediss://localhost:{port}/0", timeout=2)

    async def scenario():
        granted = await store.reserve_async("a.com", DAY, 0, 0)
        await store.close_async()
        return granted

    assert await on_loop(scenario()) is Reservation.GRANTED


@pytest_twisted.ensureDeferred
async def test_an_untrusted_certificate_is_a_storage_error(tls_redis):
    port, _ = tls_redis
    store = RedisStorage(f"rediss://localhost:{port}/0", timeout=2)

    async def scenario():
        with pytest.raises(StorageError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify"):
            await store.reserve_async("a.com", DAY, 0, 0)
        await store.close_async()

    await on_loop(scenario())
