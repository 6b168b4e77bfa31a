import socket

import pytest

from tests.server import Site


@pytest.fixture
def site():
    site = Site()
    yield site
    site.close()


@pytest.fixture
def other_site():
    site = Site()
    yield site
    site.close()


@pytest.fixture(scope="session")
def redis_server():
    from tests.budget.redis_server import RedisServer

    server = RedisServer()  # raises (the test fails, never skips) without redis-server
    yield server
    server.stop()


@pytest.fixture
def silent_port():
    """A loopback port that accepts connections and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]
