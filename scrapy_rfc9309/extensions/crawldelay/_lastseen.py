"""When each floored slot was last seen: its last request's start or end."""

from __future__ import annotations

from collections.abc import Callable


class LastSeen:
    """When each floored slot key last started or ended a request, kept while a slot
    made again for the key (Scrapy collects idle slots) would still have to wait for
    it, and while the scheduler's queue needs it to tell when the key is ready.

    Every *sweep_every* records, the keys whose floor has passed since they were last
    seen are forgotten, so that a broad crawl keeps one entry per recently used host,
    not one per host seen.  *floor* gives a key's floor, *clock* the time on the clock
    of the records.
    """

    def __init__(
        self,
        floor: Callable[[str], float],
        clock: Callable[[], float],
        sweep_every: int = 1000,
    ) -> None:
        self._floor = floor
        self._clock = clock
        self._sweep_every = sweep_every
        self._seen: dict[str, float] = {}
        self._recorded = 0

    def get(self, key: str) -> float | None:
        """When *key* was last seen, if it is still kept."""
        return self._seen.get(key)

    def record(self, key: str, seen: float) -> None:
        """Keep *seen* as *key*'s last."""
        self._seen[key] = seen
        self._recorded += 1
        if self._recorded % self._sweep_every:
            return
        now = self._clock()
        for k in [k for k, last in self._seen.items() if last + self._floor(k) <= now]:
            del self._seen[k]
