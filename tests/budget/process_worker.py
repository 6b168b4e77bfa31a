"""What each process of the multi-process storage test runs: kept apart from the
test module so that a spawned process imports only the storages, not the suite."""

import threading

from scrapy_rfc9309.budget.storage import RedisStorage, Reservation, SQLiteStorage

DAY = "2026-11-22"


def reserve_from_8_threads(kind: str, where: str, prefix: str) -> int:
    """Reservations granted to 8 threads making 25 attempts each against a limit of 100."""
    store = SQLiteStorage(where) if kind == "sqlite" else RedisStorage(where, prefix=prefix)
    granted = []

    def worker():
        for _ in range(25):
            granted.append(store.reserve("a.com", DAY, 100, 0) is Reservation.GRANTED)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    return sum(granted)
