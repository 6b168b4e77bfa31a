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
