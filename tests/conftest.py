import atexit
import gc
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


#: Seconds of wall time and of CPU (the crawler processes' included) each module's
#: tests took in all, run one at a time (one worker, on 2 cores): the modules whose
#: tests mostly wait (on a Crawl-delay, an idle close, crawler processes) and those
#: that use the CPU throughout.  Modules not named here take well under a second.
MODULE_SECONDS = {
    "test_fleet.py": (319, 30),
    "test_stop.py": (265, 10),
    "test_crawldelay.py": (65, 2),
    "test_backoff.py": (102, 3),
    "test_broad_crawl.py": (108, 38),
    "test_pqueues.py": (39, 5),
    "test_robots_liveness.py": (42, 5),
    "test_example_project.py": (19, 5),
    "test_without_reactor.py": (17, 3),
    "test_politeness_unit.py": (13, 1),
    "test_hostile_sites.py": (11, 6),
    "test_fleet_core.py": (11, 1),
    "test_memory_estimate.py": (10, 10),
    "test_robots_command.py": (6, 6),
    "test_properties.py": (5, 5),
    "test_storage_contract.py": (5, 4),
    "test_ledger_contract.py": (5, 0),
    "test_hostile_bodies.py": (4, 4),
    "test_wheel.py": (3, 3),
    "test_robots_cache.py": (4, 3),
}


def pytest_collection_modifyitems(items):
    # Begun last, the long tests would leave the workers that finished early idle;
    # begun together, the waiting ones would leave the CPU idle (12 workers: 26-40 s
    # into a run, the CPU was 60% idle while every worker waited in a fleet's test),
    # and the CPU's would queue for it.  So the tests that mostly wait, the longest
    # first, start among those that use the CPU, the most first, each kind at its
    # own pace: the time its tests started so far, over all of it, the same for both.
    per_module: dict[str, int] = {}
    for item in items:
        per_module[item.path.name] = per_module.get(item.path.name, 0) + 1

    def seconds(item) -> tuple[float, float]:
        wall, cpu = MODULE_SECONDS.get(item.path.name, (0.01, 0.01))
        return wall / per_module[item.path.name], cpu / per_module[item.path.name]

    def waits(item) -> bool:
        wall, cpu = seconds(item)
        return cpu < wall / 3

    waiting = sorted((item for item in items if waits(item)), key=lambda item: -seconds(item)[0])
    busy = sorted((item for item in items if not waits(item)), key=lambda item: -seconds(item)[1])
    waited, used = sum(seconds(item)[0] for item in waiting), sum(seconds(item)[1] for item in busy)
    merged, waited_so_far, used_so_far = [], 0.0, 0.0
    while waiting or busy:
        if waiting and (not busy or waited_so_far / waited <= used_so_far / used):
            item = waiting.pop(0)
            waited_so_far += seconds(item)[0]
        else:
            item = busy.pop(0)
            used_so_far += seconds(item)[1]
        merged.append(item)
    items[:] = merged
    for item in items:
        module = item.path.name
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if module in SUBPROCESS_MODULES:
            item.add_marker(pytest.mark.subprocess)
        if reaches_redis(item):
            item.add_marker(pytest.mark.redis)


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
