"""Many sites with the robots.txt behaviours real sites have, for crawls that must end
whatever a site does.

One HTTP proxy on 127.0.0.1 answers for every host name and port (a crawler that
uses it as its proxy reaches any name without DNS), in an asyncio loop of its own
thread, and records when each request arrived, on its own clock.  A route answers
one (host[:port], path); every other path is a page."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Writes the answer to a request (status line and all) on the connection.
Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]

PAGE = b"<html><body>page</body></html>"


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def respond(status: int = 200, body: bytes = b"", **headers: str) -> Answer:
    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(_head(status, {**headers, "Content-Length": str(len(body))}) + body)

    return answer


def redirect(status: int, location: str) -> Answer:
    return respond(status, Location=location)


def file(text: str) -> Answer:
    return respond(200, text.encode(), **{"Content-Type": "text/plain"})


def never() -> Answer:
    """No answer at all (the crawler's timeout ends the request)."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(60)

    return answer


def reset_mid_body(text: str) -> Answer:
    """A tenth of the body promised, then the connection reset."""
    body = text.encode()

    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(_head(200, {"Content-Length": str(len(body) * 10)}) + body)
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.transport.abort()

    return answer


def slow_body(text: str, pieces: int = 3, pause: float = 0.3) -> Answer:
    """The body in *pieces*, *pause* seconds apart."""
    body = text.encode()
    size = -(-len(body) // pieces)

    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(_head(200, {"Content-Length": str(len(body))}))
        for start in range(0, len(body), size):
            await writer.drain()
            await asyncio.sleep(pause)
            writer.write(body[start : start + size])

    return answer


@dataclass(frozen=True)
class Arrival:
    time: float
    host: str  # host[:port], as in the URL
    path: str


class RobotsSites:
    """``sites.route("a.com", "/robots.txt", redirect(301, "/r"))``; ``sites.proxy``
    is the URL a crawler sets as its HTTP proxy."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Answer] = {}
        self.arrivals: list[Arrival] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(30)
        self.proxy = f"http://127.0.0.1:{self.port}"

    def route(self, host: str, path: str, answer: Answer) -> None:
        self.routes[(host, path)] = answer

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()
        self._loop.close()  # stopped by close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.monotonic()
                url = urlsplit(head.split(b" ", 2)[1].decode("latin-1"))
                host = url.netloc
                with self._lock:
                    self.arrivals.append(Arrival(arrived, host, url.path))
                answer = self.routes.get((host, url.path)) or respond(200, PAGE)
                await answer(writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def paths(self, host: str) -> list[str]:
        with self._lock:
            return [arrival.path for arrival in self.arrivals if arrival.host == host]

    def arrivals_at(self, hosts: set[str]) -> list[Arrival]:
        """The arrivals at any of *hosts* (host names, any port), in time order."""
        with self._lock:
            found = [a for a in self.arrivals if a.host.split(":")[0] in hosts]
        return sorted(found, key=lambda arrival: arrival.time)

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            for task in asyncio.all_tasks():  # connections still answering (never())
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)


def short_gaps(
    arrivals: list[Arrival], delay: float, exempt: set[tuple[str, str]]
) -> list[tuple[float, Arrival, Arrival]]:
    """Consecutive arrivals closer than *delay* (5% slack for the clocks), but those
    after an *exempt* (host, path): a robots.txt redirect hop, before the file that
    gives the delay was read."""
    return [
        (later.time - earlier.time, earlier, later)
        for earlier, later in itertools.pairwise(arrivals)
        if (earlier.host, earlier.path) not in exempt and later.time - earlier.time < delay * 0.95
    ]
