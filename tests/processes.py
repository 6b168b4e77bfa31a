"""``python -m MODULE ARGS`` for the tests (a crawl of :mod:`tests.crawl_process`, a
``scrapy`` command), forked from a server that has imported Scrapy, scrapy-redis and
this package once.

Each is a real process of its own (its own reactor or event loop, signals, sockets,
working directory, environment and exit status), without the second of CPU that
starting an interpreter and importing Scrapy costs each time: the suite starts about
a hundred.  What a crawl sets up is not imported ahead: no reactor is installed
(``test_without_reactor.py`` checks each crawl's own).

A forked process exits without the interpreter's finalization: it collects its
garbage at the end instead, where what is still unreported gets printed (an asyncio
task's or a Deferred's unhandled error: what ``scrapy crawl`` prints of a crawl that
cannot start).  Its RSS counts the pages it shares with the server: the tests that
measure a crawl's memory start a plain subprocess."""

from __future__ import annotations

import gc
import multiprocessing
import os
import runpy
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
    "scrapy.cmdline",
    "scrapy_rfc9309.commands.robots",
    "scrapy_rfc9309.commands.budget",
]

_context: Any = None


def _fork_server() -> Any:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _main(argv: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """The forked process: ``python -m ARGV`` in *cwd* with *env*, its standard output
    and error written to the files *out* and *err*."""
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv)
    # The server's imports live as long as the process: the collector need not walk
    # them (its full collections would, in every crawl).
    gc.freeze()
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    finally:
        # What a new interpreter's finalization would report: the destructors of
        # objects left with an unhandled error (an asyncio task, a Deferred).
        gc.collect()


class Process:
    """``python -m MODULE ARGS``: the part of :class:`subprocess.Popen` the tests use
    (text output)."""

    def __init__(
        self, module: str, *args: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None
    ) -> None:
        self.args = [module, *args]
        self._files: list[str] = []
        for _ in range(2):
            fd, path = tempfile.mkstemp(prefix="process-")
            os.close(fd)
            self._files.append(path)
        self._output: tuple[str, str] | None = None
        self._process = _fork_server().Process(
            target=_main,
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
        """(stdout, stderr) once the process has ended (raises
        :class:`subprocess.TimeoutExpired` if it has not within *timeout*)."""
        self.wait(timeout)
        if self._output is None:
            out, err = (Path(path).read_text(errors="replace") for path in self._files)
            self._output = out, err
        return self._output

    def send_signal(self, signal: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signal)

    def kill(self) -> None:
        self._process.kill()

    def __del__(self) -> None:
        # Its output files go with it, read or not.
        for path in self._files:
            Path(path).unlink(missing_ok=True)


def run(
    module: str,
    *args: str,
    cwd: Path | str = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m MODULE ARGS`` to its end, as :func:`subprocess.run` with
    ``capture_output`` and ``text`` would; still running after *timeout*, it is killed."""
    process = Process(module, *args, cwd=cwd, env=env)
    try:
        stdout, stderr = process.communicate(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.wait(), stdout, stderr)


def crawl_process(*args: str, cwd: Path | str = ROOT, env: dict[str, str] | None = None) -> Process:
    """Start ``python -m tests.crawl_process ARGS``."""
    return Process("tests.crawl_process", *args, cwd=cwd, env=env)


def run_crawl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tests.crawl_process ARGS`` to its end (see :func:`run`)."""
    return run("tests.crawl_process", *args, timeout=timeout)
