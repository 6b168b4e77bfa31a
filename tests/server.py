"""A local HTTP site for real crawls: serves configured routes on 127.0.0.1 (an
ephemeral port) from its own thread and records every request it receives."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    status: int = 200
    body: bytes | Callable[[], Iterable[bytes]] = b""
    #: A value may be a function: called as the response is sent (a date, say).
    headers: dict[str, str | Callable[[], str]] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Hit:
    time: float
    path: str
    user_agent: str
    status: int = 200


class Site:
    """``site.route("/robots.txt", body=b"...")``; ``site.paths()`` lists what was requested."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: list[Hit] = []
        self._first: list[tuple[str, list[Route]]] = []  # (path prefix, answers left)
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body are written apart: with Nagle's algorithm on, each response to
            # a client that sends one request at a time on a kept-alive connection waits
            # for the client's delayed ACK (40 ms on Linux), as no real server makes it.
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                arrived = time.monotonic()
                route = site._first_answer(self.path)
                route = (
                    route or site.routes.get(self.path) or site.routes.get(self.path.split("?")[0])
                )
                if route is None:
                    route = Route(body=b"<html><body>page</body></html>")
                with site._lock:
                    agent = self.headers.get("User-Agent", "")
                    site.hits.append(Hit(arrived, self.path, agent, route.status))
                if route.delay:
                    time.sleep(route.delay)
                try:
                    self._respond(route)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                    site.aborted = True

            def _respond(self, route: Route) -> None:
                self.send_response(route.status)
                for name, value in route.headers.items():
                    self.send_header(name, value() if callable(value) else value)
                if isinstance(route.body, bytes):
                    self.send_header("Content-Length", str(len(route.body)))
                    self.end_headers()
                    self.wfile.write(route.body)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in route.body():
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.aborted = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def route(self, path: str, **kwargs: object) -> None:
        self.routes[path] = Route(**kwargs)  # type: ignore[arg-type]

    def answer_first(self, prefix: str, *routes: Route) -> None:
        """The first requests for paths starting with *prefix* get *routes*, in turn;
        the later ones, the usual answer."""
        self._first.append((prefix, list(routes)))

    def _first_answer(self, path: str) -> Route | None:
        with self._lock:
            for prefix, routes in self._first:
                if path.startswith(prefix) and routes:
                    return routes.pop(0)
        return None

    def paths(self) -> list[str]:
        with self._lock:
            return [hit.path for hit in self.hits]

    def count(self, path: str) -> int:
        return self.paths().count(path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


#: The sockets behind :func:`refused_port`'s ports, bound for the life of the process.
_REFUSING: list[socket.socket] = []


def refused_port() -> int:
    """A loopback port that refuses connections: bound, never listening, for the life
    of this process, so that no other test's server can take it meanwhile (a port
    merely free when asked was, once, by the time a crawl connected)."""
    refusing = socket.socket()
    refusing.bind(("127.0.0.1", 0))
    _REFUSING.append(refusing)
    return int(refusing.getsockname()[1])


def free_port() -> int:
    """A loopback port nothing listens on now, for a server to listen on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
