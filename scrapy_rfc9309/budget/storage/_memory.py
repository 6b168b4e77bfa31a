"""Budget counters in this process's memory."""

from __future__ import annotations

import threading

from ._base import BudgetStorage, Reservation, Usage, reservation_for


class MemoryStorage(BudgetStorage):
    """Counters in this process only: for tests and one-off runs."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], list[int]] = {}
        self._lock = threading.Lock()

    def reserve(self, key: str, day: str, max_requests: int, max_pages: int) -> Reservation:
        with self._lock:
            counts = self._counts.setdefault((day, key), [0, 0])
            reservation = reservation_for(counts[0], counts[1], max_requests, max_pages)
            if reservation is Reservation.GRANTED:
                counts[0] += 1
                counts[1] += 1
            return reservation

    def count_request(self, key: str, day: str) -> None:
        with self._lock:
            self._counts.setdefault((day, key), [0, 0])[0] += 1

    def release_page(self, key: str, day: str) -> None:
        with self._lock:
            counts = self._counts.get((day, key))
            if counts and counts[1] > 0:
                counts[1] -= 1

    def counts(self, key: str, day: str) -> tuple[int, int]:
        with self._lock:
            requests, pages = self._counts.get((day, key), (0, 0))
            return requests, pages

    def usage(self, day: str) -> Usage:
        with self._lock:
            return {key: (c[0], c[1]) for (d, key), c in self._counts.items() if d == day}

    def reset(self, key: str, day: str) -> None:
        with self._lock:
            self._counts.pop((day, key), None)

    def forget_before(self, day: str) -> None:
        with self._lock:
            self._counts = {(d, key): c for (d, key), c in self._counts.items() if d >= day}

    # The lock is only ever held for a few dictionary operations: answer at once.
    async def reserve_async(
        self, key: str, day: str, max_requests: int, max_pages: int
    ) -> Reservation:
        return self.reserve(key, day, max_requests, max_pages)

    async def count_request_async(self, key: str, day: str) -> None:
        self.count_request(key, day)

    async def release_page_async(self, key: str, day: str) -> None:
        self.release_page(key, day)

    async def counts_async(self, key: str, day: str) -> tuple[int, int]:
        return self.counts(key, day)
