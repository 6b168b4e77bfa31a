"""Start a real redis-server on a free loopback port for the tests."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time

from tests.server import closed_port


class RedisServer:
    """A redis-server on a free port; with *password*, clients must log in
    (``url`` never carries the password); with *durable*, every write goes to an
    append-only file first, so a :meth:`restart` keeps the data."""

    def __init__(self, password: str | None = None, durable: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed: the Redis storage tests need it "
                "(e.g. apt-get install redis-server)"
            )
        self._binary, self._password = binary, password
        self._dir = tempfile.mkdtemp(prefix="redis-") if durable else None
        # A free port may be taken between the probe and redis-server's bind: retry.
        for _attempt in range(5):
            self.port = closed_port()
            self.url = f"redis://127.0.0.1:{self.port}/0"
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
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
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

        client = redis.Redis.from_url(self.url, password=password)
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
