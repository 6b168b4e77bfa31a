"""A network between a crawler and its Redis, on loopback: a TCP proxy that forwards
each chunk half a round-trip time after it arrived, in order."""

from __future__ import annotations

import asyncio
import threading
import time


class DelayProxy:
    """A TCP proxy on 127.0.0.1 to *target*, each chunk forwarded *rtt* / 2 seconds
    after it arrived, in order: a network between the crawlers and Redis."""

    def __init__(self, target: tuple[str, int], rtt: float) -> None:
        #: Each chunk's delay (seconds); None while the network drops every chunk.
        self.delay: float | None = rtt / 2
        self.target = target
        self.port = 0
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

            async def send() -> None:
                while True:
                    due, chunk = await queue.get()
                    if not chunk:
                        break
                    await asyncio.sleep(max(due - time.monotonic(), 0))
                    writer.write(chunk)
                    await writer.drain()
                writer.close()

            sender = asyncio.ensure_future(send())
            try:
                while chunk := await reader.read(65536):
                    if self.delay is not None:  # None: the network drops it
                        queue.put_nowait((time.monotonic() + self.delay, chunk))
            except ConnectionError:
                pass
            queue.put_nowait((0.0, b""))
            await sender

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        async def main() -> None:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await asyncio.Event().wait()

        asyncio.run(main())
