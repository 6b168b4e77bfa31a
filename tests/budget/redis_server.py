"""Start a real redis-server on a free loopback port for the tests."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.server import free_port


class RedisServer:
    """A redis-server on a free port; with *password*, clients must log in
    (``url`` never carries the password); with *durable*, every write goes to an
    append-only file first, so a :meth:`restart` keeps the data; with *tls* (a
    folder), it answers only TLS, with a self-signed certificate for ``localhost``
    written there (``cert``)."""

    def __init__(
        self, password: str | None = None, durable: bool = False, tls: Path | None = None
    ) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed: the Redis storage tests need it "
                "(e.g. apt-get install redis-server)"
            )
        self._binary, self._password = binary, password
        self._dir = tempfile.mkdtemp(prefix="redis-") if durable else None
        self._tls: list[str] = []
        if tls is not None:
            self.cert, key = self_signed(tls)
            self._tls = [
                *("--tls-cert-file", str(self.cert), "--tls-key-file", str(key)),
                *("--tls-ca-cert-file", str(self.cert), "--tls-auth-clients", "no"),
            ]
        # A free port may be taken between the probe and redis-server's bind: retry.
        for _attempt in range(5):
            self.port = free_port()
            scheme = "rediss" if tls is not None else "redis"
            self.url = f"{scheme}://127.0.0.1:{self.port}/0"
            try:
                self.restart()
                return
            except RuntimeError:
                continue
        raise RuntimeError("redis-server did not start on 5 free ports")

    def restart(self) -> None:
        """Start the server (again, on the same port, empty unless *durable*)."""
        binary, password = self._binary, self._password
        if self._dir:
            persistence = ["--dir", self._dir, "--appendonly", "yes", "--appendfsync", "always"]
        else:
            persistence = ["--appendonly", "no"]
        ports = ["--port", "0", "--tls-port", str(self.port)] if self._tls else []
        self.process = subprocess.Popen(
            [
                binary,
                *(ports or ["--port", str(self.port)]),
                *self._tls,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                *persistence,
                *(["--requirepass", password] if password else []),
            ],
            stdout=subprocess.DEVNULL,
        )
        import redis

        # The probe checks no certificate: the tests say which checks they want.
        tls = {"ssl_cert_reqs": "none"} if self._tls else {}
        client = redis.Redis.from_url(self.url, password=password, **tls)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        # The port may have been taken between the probe and the bind, by another
        # worker's redis-server: then that one answered, and this one has exited.
        ours = client.info("server")["process_id"] == self.process.pid
        client.connection_pool.disconnect()  # the probe leaves no connection behind
        client.close()
        if not ours:
            self.process.kill()
            self.process.wait(10)
            raise RuntimeError("redis-server did not start: its port was taken")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for ``localhost`` and its key, written
    in *directory*."""
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
