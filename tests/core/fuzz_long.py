"""The long fuzz run of the core, outside the test suite:

    .venv/bin/python -m tests.core.fuzz_long [EXAMPLES]   (default 1,000,000)

Runs the suite's fuzz strategies for EXAMPLES inputs and prints how many ran, how
many raised (it stops at the first, and prints it), and the slowest input."""

import gc
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings

from tests.core.fuzzing import BODIES, URLS, USER_AGENTS, parse_and_check


def main() -> None:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    count = 0
    slowest = (0.0, None)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(BODIES, URLS, USER_AGENTS)
    def run(body, url, user_agent):
        nonlocal count, slowest
        gc.disable()  # time the core, not a collection of Hypothesis's own objects
        try:
            start = time.perf_counter()
            parse_and_check(body, url, user_agent)
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        count += 1
        if elapsed > slowest[0]:
            slowest = (elapsed, (body, url, user_agent))
        if count % 100_000 == 0:
            print(f"{count:,} inputs, slowest so far: {describe(*slowest)}", flush=True)

    started = time.perf_counter()
    run()
    print(f"inputs: {count:,} in {time.perf_counter() - started:,.0f} s, none raised")
    print(f"slowest: {describe(*slowest)}")


def describe(elapsed: float, example: tuple) -> str:
    body, url, user_agent = example
    unit = "byte" if isinstance(body, bytes) else "character"
    return (
        f"{elapsed * 1000:.1f} ms, a {len(body):,}-{unit} body starting {body[:80]!r},"
        f" url {url[:40]!r}, user agent {user_agent!r}"
    )


if __name__ == "__main__":
    main()
