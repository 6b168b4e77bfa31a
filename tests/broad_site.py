"""Many sites at once for broad crawls: one thread serving HTTP on *hosts* loopback
addresses (127.0.x.y, the whole 127/8 range is loopback), all on one port, recording
when each request arrived, by host, on the server's own clock."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable

#: Answers a request for a path on a host, with its headers (names in lower case):
#: (status, headers, body).
Responder = Callable[[str, str, dict[str, str]], tuple[int, dict[str, str], bytes]]


def robots_and_pages(robots: str) -> Responder:
    """Answers *robots* at ``/robots.txt`` and a small HTML page at every other path."""

    def respond(host: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if path == "/robots.txt":
            return 200, {}, robots.encode()
        return 200, {"Content-Type": "text/html"}, b"<html><body>page</body></html>"

    return respond


def addresses(count: int, first: int = 2) -> list[str]:
    """*count* loopback addresses, 127.0.1.2 onwards (127.0.0.1 stays for other tests)."""
    numbers = itertools.islice(itertools.count(256 + first), count)
    return [f"127.0.{n // 256}.{n % 256}" for n in numbers]


def _header(line: str) -> tuple[str, str]:
    name, _, value = line.partition(":")
    return name.strip().lower(), value.strip()


class BroadSite:
    """*respond* answers every request of every host; other than robots.txt, each
    answer is sent *page_time* seconds after the request came (or ``page_time(host,
    path)`` seconds), robots.txt *robots_time* seconds after; ``most_pages`` is
    the most such requests in progress at once, over all hosts, ``most_per_host``
    at one host."""

    def __init__(
        self,
        hosts: list[str],
        respond: Responder,
        page_time: float | Callable[[str, str], float] = 0.0,
        robots_time: float = 0.0,
    ) -> None:
        self.hosts = hosts
        self.respond = respond
        self.page_time = page_time
        self.robots_time = robots_time
        self.most_pages = 0
        self._pages = 0
        self.most_per_host = 0
        self._per_host: dict[str, int] = defaultdict(int)
        self.arrivals: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.AbstractServer] = []
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(30)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        ready.set()
        self._loop.run_forever()
        self._loop.close()  # stopped by close()

    async def _listen(self) -> None:
        first = await asyncio.start_server(self._serve, self.hosts[0], 0)
        self.port = first.sockets[0].getsockname()[1]
        self._servers = [first]
        for host in self.hosts[1:]:
            self._servers.append(await asyncio.start_server(self._serve, host, self.port))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host = writer.get_extra_info("sockname")[0]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.monotonic()
                first, *lines = head.decode("latin-1").split("\r\n")
                path = first.split(" ", 2)[1]
                received = dict(_header(line) for line in lines if ":" in line)
                page = path != "/robots.txt"
                with self._lock:
                    self.arrivals[host].append((arrived, path))
                    if page:
                        self._pages += 1
                        self.most_pages = max(self.most_pages, self._pages)
                        self._per_host[host] += 1
                        self.most_per_host = max(self.most_per_host, self._per_host[host])
                try:
                    wait = self.page_time
                    if callable(wait):
                        wait = wait(host, path)
                    if not page:
                        wait = self.robots_time
                    if wait:
                        await asyncio.sleep(wait)
                    status, headers, body = self.respond(host, path, received)
                    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
                    lines += [f"{name}: {value}" for name, value in headers.items()]
                    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
                    await writer.drain()
                finally:
                    if page:
                        with self._lock:
                            self._pages -= 1
                            self._per_host[host] -= 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"

    def gaps(self) -> list[tuple[float, str, str, str]]:
        """Every gap between two consecutive arrivals at one host: (seconds, host,
        the earlier path, the later path)."""
        with self._lock:
            per_host = {host: sorted(hits) for host, hits in self.arrivals.items()}
        return [
            (later[0] - earlier[0], host, earlier[1], later[1])
            for host, hits in per_host.items()
            for earlier, later in itertools.pairwise(hits)
        ]

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
