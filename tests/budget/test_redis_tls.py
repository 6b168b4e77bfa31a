"""The pipelined Redis client over TLS (``rediss://``) against a real redis-server
started with ``--tls-port``, its certificate checked with the default rules."""

import datetime
import shutil
import socket
import subprocess
import time

import pytest
import pytest_twisted
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scrapy_rfc9309.budget.storage import RedisStorage, Reservation, StorageError
from tests.helpers import DAY, on_loop
from tests.server import closed_port


def self_signed(directory):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture
def tls_redis(tmp_path):
    cert, key = self_signed(tmp_path)
    port = closed_port()
    process = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(cert),
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:  # listening yet?
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None, "redis-server did not start with TLS"
            assert time.monotonic() < deadline, "redis-server did not listen in 10 s"
            time.sleep(0.05)
    yield port, cert
    process.terminate()
    process.wait(10)


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
