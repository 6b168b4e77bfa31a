"""Budget counters: one small interface (:class:`BudgetStorage`), three backends.

Counters are kept per (day, domain key): ``requests`` sent and ``pages`` reserved.
A reservation is atomic: it checks both limits and adds one to both counters, or
changes nothing, so concurrent crawlers can never overshoot a limit.  Every
backend passes the same contract tests (``tests/budget/test_storage_contract.py``).

The plain methods may block (on a file lock or the network).  The ``*_async``
methods of the hot path (reserve, count a request, release a page, read one
domain's counts) never block the
event loop they run on: the memory storage answers at once, the SQLite storage
tries its statement without waiting for a lock and hands it to a worker thread only
when another writer holds the file, the Redis storage uses a pipelined asyncio
connection, and any other storage falls back to a worker thread.

Counters are kept :data:`KEEP_DAYS` days: Redis keys expire; the budget middleware
has the other storages delete older days when a crawl opens (:meth:`forget_before`).

``DOMAINBUDGET_STORAGE`` names a backend by its path in this package, e.g.
``scrapy_rfc9309.budget.storage.SQLiteStorage``.
"""

from ._base import (
    KEEP_DAYS,
    BudgetStorage,
    Reservation,
    StorageError,
    Usage,
    first_kept_day,
    reservation_for,
)
from ._memory import MemoryStorage
from ._redis import RedisStorage
from ._sqlite import SQLiteStorage

__all__ = [
    "KEEP_DAYS",
    "BudgetStorage",
    "MemoryStorage",
    "RedisStorage",
    "Reservation",
    "SQLiteStorage",
    "StorageError",
    "Usage",
    "first_kept_day",
    "reservation_for",
]
