"""The demo's own small web site, served on 127.0.0.1 so the crawl runs offline.

* the bookshop, ``http://127.0.0.1:PORT``: an index, ten books, an about page,
  private and draft pages, and ``demo/site/robots.txt``;
* a partner site, ``http://localhost:PORT2``, whose robots.txt answers 503: under
  RFC 9309 the crawler must then fetch nothing else from it.

Each server records every request it receives (time, path), which the report
compares with what the crawler believes it did.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROBOTS_TXT = (Path(__file__).parent / "site" / "robots.txt").read_bytes()
BOOKS = 10


def _page(title: str, links: list[str]) -> bytes:
    items = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return (
        f"<html><head><title>{title}</title></head><body><h1>{title}</h1><ul>{items}</ul>".encode()
    )


@dataclass(frozen=True)
class Hit:
    time: float
    path: str


class Server:
    """One host: ``routes`` maps a path to (status, body)."""

    def __init__(self, routes: dict[str, tuple[int, bytes]], host: str) -> None:
        self.routes = routes
        self.hits: list[Hit] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else 40 ms per one-at-a-time response

            def do_GET(self) -> None:
                server.hits.append(Hit(time.monotonic(), self.path))
                status, body = server.routes.get(self.path, (404, b"not found"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://{host}:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def pages(self) -> list[str]:
        """Paths of the requests other than robots.txt."""
        return [hit.path for hit in self.hits if hit.path != "/robots.txt"]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class DemoSite:
    """The bookshop and its partner, started together."""

    def __init__(self) -> None:
        self.partner = Server({"/robots.txt": (503, b"busy"), "/": (200, b"partner")}, "localhost")
        books = [f"/books/{number}" for number in range(1, BOOKS + 1)]
        links = ["/about", "/private/admin", "/drafts/new", "/drafts/published", *books]
        links += [f"{self.partner.url}/", f"{self.partner.url}/offers"]
        routes = {
            "/robots.txt": (200, ROBOTS_TXT),
            "/": (200, _page("Demo bookshop", links)),
            "/about": (200, _page("About", ["/"])),
            "/private/admin": (200, _page("Admin", [])),
            "/drafts/new": (200, _page("Draft", [])),
            "/drafts/published": (200, _page("Published draft", ["/"])),
            **{book: (200, _page(f"Book {book[7:]}", ["/"])) for book in books},
        }
        self.shop = Server(routes, "127.0.0.1")

    def close(self) -> None:
        self.shop.close()
        self.partner.close()
