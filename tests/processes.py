"""Crawler processes for the tests (:mod:`tests.crawl_process`), forked from a server
that has imported Scrapy, scrapy-redis and this package once.

Each crawl is a real process of its own (its own reactor or event loop, signals,
sockets and exit status), as ``python -m tests.crawl_process ARGS`` would be, without
the second of CPU that starting an interpreter and importing Scrapy costs each time:
the suite starts about a hundred.  What a crawl sets up is not imported ahead: no
reactor is installed (``test_without_reactor.py`` checks each crawl's own).  The
tests that measure a crawl's memory start it as a plain subprocess instead (a forked
process's RSS counts the pages it shares with the server)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: What every crawl would import: the server imports it once.
PRELOAD = [
    "tests.crawl_process",
    "scrapy_rfc9309",
    "scrapy_rfc9309.addon",
    "scrapy_redis.scheduler",
    "scrapy_redis.dupefilter",
    "scrapy_redis.spiders",
    "scrapy.core.downloader.handlers.http11",
    "scrapy.downloadermiddlewares.cookies",
    "scrapy.extensions.remote_control",
]

_context: Any = None


def _fork_server() -> Any:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _crawl(args: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """The forked process: ``python -m tests.crawl_process ARGS`` in *cwd* with *env*,
    its standard output and error written to the files *out* and *err*."""
    for fd, path in ((1, out), (2, err)):
        os.dup2(os.open(path, os.O_WRONLY), fd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["tests.crawl_process", *args]
    from tests import crawl_process

    crawl_process.main()


class CrawlProcess:
    """One crawl: the part of :class:`subprocess.Popen` the tests use (text output)."""

    def __init__(
        self, *args: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None
    ) -> None:
        self.args = list(args)
        self._files = []
        for _ in range(2):
            fd, path = tempfile.mkstemp(prefix="crawl-")
            os.close(fd)
            self._files.append(path)
        self._output: tuple[str, str] | None = None
        self._process = _fork_server().Process(
            target=_crawl,
            args=(self.args, str(cwd), dict(os.environ if env is None else env), *self._files),
        )
        self._process.start()
        self.pid: int = self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._process.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """(stdout, stderr) once the crawl has ended (raises
        :class:`subprocess.TimeoutExpired` if it has not within *timeout*)."""
        self.wait(timeout)
        if self._output is None:
            out, err = (Path(path).read_text(errors="replace") for path in self._files)
            self._output = out, err
            for path in self._files:
                Path(path).unlink()
        return self._output

    def send_signal(self, signal: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signal)

    def kill(self) -> None:
        self._process.kill()


def run_crawl(
    *args: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run one crawl to its end, as :func:`subprocess.run` with ``capture_output``
    and ``text`` would; a crawl still running after *timeout* is killed."""
    process = CrawlProcess(*args, cwd=cwd, env=env)
    try:
        stdout, stderr = process.communicate(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.wait(), stdout, stderr)
