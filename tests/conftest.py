import atexit
import gc
import itertools
import os
import shutil
import socket
import tempfile

import pytest

from tests.server import Site

#: The environment variable naming the suite's temporary directory (set by the
#: controlling process, inherited by the workers and the crawls they start).
SUITE_TMP = "RFC9309_TESTS_TMP"


def pytest_configure(config):
    """Every temporary file of the suite (the workers', the crawler processes', the
    redis-servers' folders, pytest's own ``tmp_path``) goes in one directory, which
    the controlling process removes when the session ends: a run leaves nothing in
    the system's temporary directory, whatever a killed process left behind."""
    if os.environ.get(SUITE_TMP):  # a worker: the controller made it
        return
    directory = tempfile.mkdtemp(prefix="rfc9309-tests-")
    os.environ[SUITE_TMP] = os.environ["TMPDIR"] = directory
    tempfile.tempdir = directory
    # At exit, not at pytest_unconfigure: multiprocessing's own exit handler (its
    # module is first imported later, so its handler runs before this one) removes
    # the folder it made in there, and would fail if the directory were gone.
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def _collector_skips_what_came_before():
    """What the test process holds before a test (its modules, earlier tests'
    leftovers) outlives it: the collector's full collections during the test need
    not walk it."""
    gc.freeze()
    yield
    gc.unfreeze()


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
def tls_redis(tmp_path):
    """A redis-server answering only TLS, its certificate self-signed for
    ``localhost``: (port, certificate file)."""
    from tests.budget.redis_server import RedisServer

    server = RedisServer(tls=tmp_path)
    yield server.port, server.cert
    server.stop()


@pytest.fixture
def fleet_redis(redis_server):
    """The URL of an emptied database of the session's redis-server, for a fleet's
    crawls (queue, spacing, robots.txt, budgets)."""
    import redis

    url = redis_server.url.rsplit("/", 1)[0] + "/5"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def silent_port():
    """A loopback port that accepts connections and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


#: Markers by module, for ``make test-fast`` (``-m "not slow and not redis and not
#: subprocess"``): modules whose tests wait real delays or crawl hundreds of hosts
#: (slow), and modules whose tests run crawler processes or commands (subprocess).
#: Tests that use a redis-server are marked ``redis`` (see :func:`reaches_redis`).
SLOW_MODULES = {
    "test_backoff.py",
    "test_broad_crawl.py",
    "test_crawldelay.py",
    "test_crosscheck.py",
    "test_hostile_sites.py",
    "test_politeness_unit.py",
    "test_pqueues.py",
}
SUBPROCESS_MODULES = {
    "test_budget_command.py",
    "test_example_project.py",
    "test_fleet.py",
    "test_memory_estimate.py",
    "test_processes.py",
    "test_redis_tls.py",
    "test_robots_command.py",
    "test_robots_liveness.py",
    "test_stop.py",
    "test_startup_warnings.py",
    "test_wheel.py",
}


#: Modules whose tests use the CPU throughout (property tests, memory measures,
#: hostile files, imports in fresh interpreters): each starts beside a fleet test,
#: whose crawler processes mostly wait on Crawl-delays and idle closes.
CPU_MODULES = {
    "test_hostile_bodies.py",
    "test_memory_estimate.py",
    "test_properties.py",
    "test_purity.py",
}


def pytest_collection_modifyitems(items):
    # The longest tests first, the fleet's (crawler processes for 10-40 s each), each
    # beside a test that uses the CPU, then the other subprocess and slow ones: begun
    # last, they would leave the workers that finished early idle, and the fleet's
    # tests alone leave the CPU idle while they wait (make test with 12 workers, in
    # one day's runs: with the fleet's tests alone first 99-115 s in 8 runs, mean
    # 107 s; beside the CPU's 92-112 s in 13 runs, mean 101 s, and faster in each
    # of 4 runs side by side, by 1 to 7 s).
    items.sort(key=lambda item: _start_rank(item.path.name))
    fleet = [item for item in items if _start_rank(item.path.name) == 0]
    cpu = [item for item in items if item.path.name in CPU_MODULES]
    paired = {*fleet, *cpu}
    rest = [item for item in items if item not in paired]
    pairs = itertools.zip_longest(fleet, cpu)
    items[:] = [item for pair in pairs for item in pair if item is not None] + rest
    for item in items:
        module = item.path.name
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if module in SUBPROCESS_MODULES:
            item.add_marker(pytest.mark.subprocess)
        if reaches_redis(item):
            item.add_marker(pytest.mark.redis)


def _start_rank(module: str) -> int:
    if module == "test_fleet.py":
        return 0
    return 1 if module in SUBPROCESS_MODULES else 2 if module in SLOW_MODULES else 3


def reaches_redis(item) -> bool:
    """Whether a test needs a redis-server: by a fixture of one (``redis_server``,
    ``fleet_redis``, ``redis_with_password``), or a parameter naming a Redis
    backend (the storages' contract suite); tests that start their own are marked
    ``redis`` where they are written."""
    if any("redis" in name for name in item.fixturenames):
        return True
    params = getattr(item, "callspec", None)
    return params is not None and any(
        isinstance(value, str) and value.startswith("redis") for value in params.params.values()
    )
