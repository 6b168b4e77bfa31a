"""Python's garbage collector paused while a big file is parsed or compiled."""

from __future__ import annotations

import gc
import threading
from contextlib import AbstractContextManager, nullcontext

#: Parsing more lines, or compiling more rules, than this pauses the garbage collector.
PAUSE_COLLECTOR_AT = 2_000


class _CollectorPaused:
    """Python's cyclic garbage collector paused for a ``with`` block (see
    :func:`collector_paused`)."""

    __slots__ = ()

    def __enter__(self) -> None:
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        gc.enable()


def collector_paused(size: int) -> AbstractContextManager[None]:
    """A ``with`` block's context: the garbage collector paused, if it is enabled and
    *size* (lines to parse, rules to compile) is above :data:`PAUSE_COLLECTOR_AT`.

    Parsing and compiling a file make several objects a rule, none in a reference
    cycle, and every 700 of them set off a collection that walks the young objects,
    now and then all of them: the parse and first check of 25,000 rules "/*<n>*ab"
    take 137 to 146 ms with it running, 83 to 94 paused (best of 8, two runs).  Only
    when the collector runs changes: it runs again as soon as the block ends.

    Never on another thread than the main one: the collector is the process's, and a
    worker thread parsing a big file (the robots middleware parses files of 16 KiB or
    more on one) would pause it for every other site's work on the event loop
    meanwhile.  (A program that disables it on another thread while a block runs on
    the main one finds it enabled again.)
    """
    if size <= PAUSE_COLLECTOR_AT or not gc.isenabled():
        return nullcontext()
    if threading.current_thread() is not threading.main_thread():
        return nullcontext()
    return _CollectorPaused()
