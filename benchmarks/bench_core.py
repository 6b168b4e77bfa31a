"""Parser/matcher benchmark: scrapy_rfc9309 vs Protego, the stdlib and Google's C++ parser.

Run from the repository root:  ``python benchmarks/bench_core.py``  (or ``make bench``)

All four run side by side in one process on the same inputs:

* the real robots.txt corpus in ``tests/data/robots-corpus`` (295 files, provenance in
  its README and MANIFEST.tsv) and the URLs actually crawled on 197 of those hosts;
* a synthetic 500 KiB robots.txt;
* adversarial wildcard patterns against long URLs.

Google's parser (``fast-robotstxt``) has no "parse once" API: every call parses the
file and checks one URL, which is what its Python binding offers.  Its memory use
is not visible to tracemalloc and is not reported.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from urllib.robotparser import RobotFileParser

import robotstxt as google
from protego import Protego

from scrapy_rfc9309 import RobotsTxt

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "robots-corpus"
USER_AGENTS = ("MyCrawler", "Googlebot")


def stdlib_parse(text: str) -> RobotFileParser:
    parser = RobotFileParser()
    parser.parse(text.splitlines())
    return parser


PARSERS: dict[str, Callable[[str], object]] = {
    "scrapy_rfc9309": RobotsTxt.parse,
    "protego": Protego.parse,
    "stdlib": stdlib_parse,
}


def checker(name: str, parsed: object, text: str) -> Callable[[str, str], bool]:
    if name == "scrapy_rfc9309":
        return parsed.allowed  # type: ignore[attr-defined, no-any-return]
    if name == "protego":
        return lambda url, ua: parsed.can_fetch(url, ua)  # type: ignore[attr-defined]
    if name == "stdlib":
        return lambda url, ua: parsed.can_fetch(ua, url)  # type: ignore[attr-defined]
    matcher = google.RobotsMatcher()
    return lambda url, ua: matcher.is_allowed(text, ua, url)


def best_of(repeat: int, func: Callable[[], object]) -> float:
    """Best wall time of *repeat* runs (the least disturbed by a shared machine)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def load_corpus() -> tuple[dict[str, str], dict[str, list[str]]]:
    files = {}
    for path in sorted((CORPUS / "files").glob("*.txt")):
        files[path.stem] = path.read_bytes().decode("utf-8", "replace")
    urls = {}
    for path in sorted((CORPUS / "urls").glob("*.txt")):
        urls[path.stem] = [u for u in path.read_text().splitlines() if u.strip()]
    return files, urls


def synthetic_file(size: int = 512_000, seed: int = 1) -> str:
    rng = random.Random(seed)
    words = ["shop", "cart", "search", "user", "api", "img", "static", "blog", "tag", "page"]
    lines = []
    total = 0
    group = 0
    while total < size - 200:
        if len(lines) % 400 == 0:
            line = f"\nUser-agent: {'*' if group % 5 == 0 else 'bot' + str(group)}"
            group += 1
        else:
            parts = "/".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
            kind = rng.choice(["Disallow", "Disallow", "Allow"])
            tail = rng.choice(["", "/", "*", "*.php$", "?*id=", "/*/edit"])
            line = f"{kind}: /{parts}{tail}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def row(label: str, values: dict[str, float], fmt: str, base: str = "scrapy_rfc9309") -> str:
    cells = [f"{label:<34}"]
    for name in ("scrapy_rfc9309", "protego", "stdlib", "google"):
        value = values.get(name)
        cells.append(f"{fmt.format(value) if value is not None else 'n/a':>16}")
    return " ".join(cells)


def ratio_line(label: str, values: dict[str, float], higher_is_better: bool) -> str:
    ours = values["scrapy_rfc9309"]
    parts = []
    for name in ("protego", "stdlib", "google"):
        other = values.get(name)
        if other is None or ours == 0 or other == 0:
            continue
        ratio = ours / other if higher_is_better else other / ours
        parts.append(f"{ratio:.1f}x vs {name}")
    return f"{'':<4}{label}: scrapy_rfc9309 is " + ", ".join(parts) + " (>1 = faster)"


def bench_parse(files: dict[str, str], repeat: int) -> list[str]:
    out = []
    medians: dict[str, float] = {}
    totals: dict[str, float] = {}
    for name, parse in PARSERS.items():
        per_file = [best_of(repeat, lambda t=text, p=parse: p(t)) for text in files.values()]
        medians[name] = statistics.median(per_file) * 1e6
        totals[name] = sum(per_file) * 1e3

    # Ours compiles a group's patterns on the first check for a crawler: count that too.
    def parse_and_first_check(text: str) -> None:
        RobotsTxt.parse(text).allowed("/", "MyCrawler")

    per_file = [best_of(repeat, lambda t=text: parse_and_first_check(t)) for text in files.values()]
    first_check_median = statistics.median(per_file) * 1e6
    out.append(row("parse, median per real file (us)", medians, "{:.1f}"))
    out.append(row("parse, whole corpus (ms)", totals, "{:.1f}"))
    out.append(
        row("parse + first check, median (us)", {"scrapy_rfc9309": first_check_median}, "{:.1f}")
    )
    out.append(ratio_line("parse median", medians, higher_is_better=False))
    medians["scrapy_rfc9309"] = first_check_median
    out.append(ratio_line("parse + first check median", medians, higher_is_better=False))
    return out


def bench_checks(files: dict[str, str], urls: dict[str, list[str]], repeat: int) -> list[str]:
    rates: dict[str, float] = {}
    for name in (*PARSERS, "google"):
        elapsed = 0.0
        count = 0
        for host, host_urls in urls.items():
            text = files[host]
            parsed = PARSERS[name](text) if name in PARSERS else None
            check = checker(name, parsed, text)
            for ua in USER_AGENTS:
                check(host_urls[0], ua)  # warm-up (ours: compile the group's patterns)

            def run(
                check: Callable[[str, str], bool] = check, host_urls: list[str] = host_urls
            ) -> None:
                for ua in USER_AGENTS:
                    for url in host_urls:
                        check(url, ua)

            elapsed += best_of(repeat, run)
            count += len(host_urls) * len(USER_AGENTS)
        rates[name] = count / elapsed
    return [
        row(f"checks/s, pre-parsed ({count} checks)", rates, "{:,.0f}"),
        row("time per check (us)", {k: 1e6 / v for k, v in rates.items()}, "{:.2f}"),
        ratio_line("check throughput", rates, higher_is_better=True),
    ]


def bench_big_file(repeat: int) -> list[str]:
    text = synthetic_file()
    times = {
        name: best_of(repeat, lambda p=parse: p(text)) * 1e3 for name, parse in PARSERS.items()
    }
    first = best_of(repeat, lambda: RobotsTxt.parse(text).allowed("/shop/cart", "MyCrawler")) * 1e3
    google_one = best_of(repeat, lambda: google.RobotsMatcher().is_allowed(text, "MyCrawler", "/x"))
    times["google"] = google_one * 1e3
    out = [
        row(f"parse {len(text.encode()):,} B file (ms)", times, "{:.1f}"),
        row("  + first check (ms)", {"scrapy_rfc9309": first}, "{:.1f}"),
        "    (google: one parse+check call)",
        ratio_line("500 KiB parse", times, higher_is_better=False),
    ]
    times["scrapy_rfc9309"] = first
    out.append(ratio_line("500 KiB parse + first check", times, higher_is_better=False))
    return out


def bench_memory(files: dict[str, str]) -> list[str]:
    peaks: dict[str, float] = {}
    for name, parse in PARSERS.items():
        gc.collect()
        tracemalloc.start()
        kept = [parse(text) for text in files.values()]
        if name == "scrapy_rfc9309":
            for parsed in kept:
                parsed.allowed("/", "MyCrawler")  # type: ignore[attr-defined]
        peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        del kept
    return [row("peak memory, whole corpus kept (MiB)", peaks, "{:.1f}")]


def bench_adversarial() -> list[str]:
    out = []
    patterns = ["/*a*a*a*a*a*a*a*a*b$", "/" + "*a" * 50 + "*b", "/*" + "a*" * 20 + "ab$"]
    for pattern in patterns:
        text = f"User-agent: *\nDisallow: {pattern}\n"
        for length in (1_000, 10_000, 100_000):
            url = "https://example.com/" + "a" * length
            times = {}
            for name in (*PARSERS, "google"):
                parsed = PARSERS[name](text) if name in PARSERS else None
                check = checker(name, parsed, text)
                times[name] = best_of(3, lambda c=check, u=url: c(u, "MyCrawler")) * 1e3
            label = (
                pattern if len(pattern) <= 20 else f"{pattern[:8]}..{pattern[-8:]} ({len(pattern)})"
            )
            out.append(row(f"{label:<22} /a*{length:<7} (ms)", times, "{:.3f}"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (best kept)")
    args = parser.parse_args()
    files, urls = load_corpus()
    names = f"{'':<34} " + " ".join(
        f"{n:>16}" for n in ("scrapy_rfc9309", "protego", "stdlib", "google")
    )
    print(
        f"Python {sys.version.split()[0]}; corpus: {len(files)} files, "
        f"{sum(map(len, urls.values())):,} URLs on {len(urls)} hosts; best of {args.repeat}"
    )
    print(names)
    for section in (
        bench_parse(files, args.repeat),
        bench_big_file(args.repeat),
        bench_checks(files, urls, args.repeat),
        bench_memory(files),
        bench_adversarial(),
    ):
        print("\n".join(section))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
