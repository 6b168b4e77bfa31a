"""The long, coverage-guided fuzz run of the core, outside the test suite (atheris):

    .venv/bin/pip install atheris
    .venv/bin/python -m tests.core.fuzz_atheris -atheris_runs=1000000

Seeded with the bundled corpus of real robots.txt files.  Each input is split into a
robots.txt body, a URL and a User-Agent; parsing and checking must never raise.  At
the end it prints how many inputs ran and the slowest one (timed without the
fuzzer's own work; re-timed alone, best of 5)."""

import atexit
import gc
import sys
import time
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from tests.core.fuzzing import parse_and_check

CORPUS = Path(__file__).resolve().parents[1] / "data" / "robots-corpus" / "files"
USER_AGENTS = ["MyBot", "mybot/2.0 (+http://x)", "other", ""]

count = 0
slowest = (0.0, b"", "", "")


def split(data: bytes) -> tuple[bytes, str, str]:
    provider = atheris.FuzzedDataProvider(data)
    user_agent = USER_AGENTS[provider.ConsumeIntInRange(0, len(USER_AGENTS) - 1)]
    url = provider.ConsumeUnicodeNoSurrogates(provider.ConsumeIntInRange(0, 200))
    return provider.ConsumeBytes(len(data)), url, user_agent


def test_one_input(data: bytes) -> None:
    global count, slowest
    body, url, user_agent = split(data)
    gc.disable()
    try:
        start = time.perf_counter()
        parse_and_check(body, url, user_agent)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    count += 1
    if elapsed > slowest[0]:
        slowest = (elapsed, body, url, user_agent)


def report() -> None:
    _, body, url, user_agent = slowest
    best = min(_timed(body, url, user_agent) for _ in range(5))
    print(f"\ninputs: {count:,}, none raised")
    print(
        f"slowest: {best * 1000:.1f} ms (best of 5, alone), a {len(body):,}-byte body "
        f"starting {body[:60]!r}, url {url[:40]!r}, user agent {user_agent!r}"
    )


def _timed(body: bytes, url: str, user_agent: str) -> float:
    start = time.perf_counter()
    parse_and_check(body, url, user_agent)
    return time.perf_counter() - start


def main() -> None:
    seeds = Path("/tmp/rfc9309-fuzz-seeds")
    seeds.mkdir(exist_ok=True)
    for file in CORPUS.glob("*.txt"):
        (seeds / file.name).write_bytes(b"\x00\x00" + file.read_bytes()[:4094])
    atexit.register(report)
    atheris.Setup([*sys.argv, "-max_len=4096", "-rss_limit_mb=4096", str(seeds)], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
