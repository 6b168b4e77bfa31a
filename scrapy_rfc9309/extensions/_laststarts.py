"""The last request start of each floored slot, for slots Scrapy collects while idle."""

from __future__ import annotations

from collections.abc import Callable


class LastStarts:
    """When each floored slot key last started a request, kept while a slot made again
    for the key would still have to wait for it.

    Every *sweep_every* records, the keys whose floor has passed since their last
    start are forgotten, so that a broad crawl keeps one entry per recently used host,
    not one per host seen.  *floor* gives a key's floor, *clock* the time on the clock
    of the starts.
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
        self._starts: dict[str, float] = {}
        self._recorded = 0

    def get(self, key: str) -> float | None:
        """When *key* last started a request, if it is still kept."""
        return self._starts.get(key)

    def record(self, key: str, started: float) -> list[str]:
        """Keep *started* as *key*'s last start; return the keys forgotten meanwhile."""
        self._starts[key] = started
        self._recorded += 1
        if self._recorded % self._sweep_every:
            return []
        now = self._clock()
        forgotten = [k for k, last in self._starts.items() if last + self._floor(k) <= now]
        for k in forgotten:
            del self._starts[k]
        return forgotten
