"""Requests a process's shared queue scheduled while its Redis was away and could
not give to it before the process stopped: saved in a file of their own, in the
project's data directory, and given to Redis by the next process on this machine
that opens the same queue.  Files only: no Scrapy, no Redis.

A file is written whole or not at all (a temporary file renamed over it), and taken
by renaming it, so two processes opening the queue at once never both take it."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SUFFIX = ".requests"


def save(directory: Path, queue: str, process: str, records: list[Any]) -> Path:
    """Write *records* (the queue's encoded requests) for *queue*, as saved by
    *process*; the file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{queue}.{process}{SUFFIX}"
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        pickle.dump(records, file, protocol=4)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    return path


def take(directory: Path, queue: str, process: str) -> Iterator[tuple[Path, list[Any]]]:
    """Each file saved for *queue* and not taken yet, taken by *process*, with its
    records; the file is deleted when the caller asks for the next one.  A file that
    cannot be read raises :class:`OSError` or :class:`pickle.UnpicklingError` naming
    it, and stays (renamed ``….taken-by-{process}``)."""
    for path in sorted(directory.glob(f"{queue}.*{SUFFIX}")):
        taken = path.with_name(f"{path.name}.taken-by-{process}")
        try:
            os.rename(path, taken)
        except FileNotFoundError:
            continue  # another process took it first
        try:
            with open(taken, "rb") as file:
                records = pickle.load(file)
        except Exception as exc:
            raise pickle.UnpicklingError(f"{taken}: {exc}") from exc
        yield path, records
        taken.unlink()
