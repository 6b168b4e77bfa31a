"""A small asyncio Redis client for the budget's hot path: one pipelined connection.

Each command is written at once, without waiting for the replies to earlier
ones, and replies are handed to their callers in order (Redis answers the
commands of a connection in the order it received them).  Per command this costs
a fraction of the CPU of a general-purpose client, which matters at thousands of
reservations a second on a crawler's event loop.  It speaks RESP2 (simple
strings, errors, integers, bulk strings, arrays) and nothing else: no pub/sub,
no transactions, no cluster redirections.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


class RedisReplyError(Exception):
    """Redis answered a command with an error reply (``NOSCRIPT ...``, ``WRONGPASS ...``)."""


class RedisConnectionError(Exception):
    """Connecting failed, the connection was lost, or a reply was later than the timeout."""


#: What this package's client raises when Redis cannot serve a call: it cannot be
#: reached, does not answer, or refuses the call (out of memory, a read-only
#: replica, writes stopped after a failed save).
CLIENT_ERRORS = (RedisConnectionError, RedisReplyError)


def redis_errors() -> tuple[type[Exception], ...]:
    """The same for a call through redis-py (any of its errors) or this package's
    client (needs redis-py)."""
    import redis

    return (redis.RedisError, OSError, *CLIENT_ERRORS)


@dataclass(frozen=True)
class RedisAddress:
    """Where the server is (a TCP host and port, or a Unix socket *path*) and how to log in."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None
    tls: ssl.SSLContext | None = None
    username: str | None = None
    password: str | None = None
    db: int = 0
    timeout: float = 5.0


class PipelinedRedis:
    """``await client.call("EVALSHA", sha, 1, key, ...)`` returns the reply.

    Connects on first use and again after a failure.  A command fails with
    :class:`RedisConnectionError` when the connection is lost or when the oldest
    unanswered command is older than ``address.timeout`` (the connection is then
    dropped).  Bound to the event loop that first uses it.
    """

    def __init__(self, address: RedisAddress) -> None:
        self.address = address
        self._protocol: _RespProtocol | None = None
        self._connecting: asyncio.Future[_RespProtocol] | None = None

    async def call(self, *args: bytes | str | int) -> Any:
        protocol = self._protocol
        if protocol is None or not protocol.open:
            protocol = await self._connected()
        return await protocol.send(args)

    async def run_script(self, source: str, sha: str, keys: Sequence[str], *args: Any) -> Any:
        """Run the Lua *source* (whose SHA-1 is *sha*) on *keys* and *args*: by its
        SHA, and by its source when the server lacks it (which loads it)."""
        try:
            return await self.call("EVALSHA", sha, len(keys), *keys, *args)
        except RedisReplyError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self.call("EVAL", source, len(keys), *keys, *args)

    def close(self) -> None:
        """Drop the connection, and any being made (a later call connects again)."""
        if self._connecting is not None:
            self._connecting.cancel()
        if self._protocol is not None:
            self._protocol.close()
            self._protocol = None

    async def _connected(self) -> _RespProtocol:
        # Callers that arrive while a connection is being made share it.
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
            self._connecting.add_done_callback(self._connect_done)
        return await asyncio.shield(self._connecting)

    def _connect_done(self, connecting: asyncio.Future[_RespProtocol]) -> None:
        self._connecting = None
        if not connecting.cancelled() and connecting.exception() is None:
            self._protocol = connecting.result()

    async def _connect(self) -> _RespProtocol:
        address = self.address
        loop = asyncio.get_running_loop()

        def factory() -> _RespProtocol:
            return _RespProtocol(address.timeout)

        where = address.path or f"{address.host}:{address.port}"
        try:
            if address.path:
                connecting = loop.create_unix_connection(factory, address.path, ssl=address.tls)
            else:
                connecting = loop.create_connection(
                    factory, address.host, address.port, ssl=address.tls
                )
            _, protocol = await asyncio.wait_for(connecting, address.timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            raise RedisConnectionError(f"cannot connect to Redis at {where}: {exc!r}") from exc
        try:
            if address.password is not None:
                user = (address.username,) if address.username else ()
                await protocol.send(("AUTH", *user, address.password))
            if address.db:
                await protocol.send(("SELECT", address.db))
        except RedisReplyError as exc:
            protocol.close()
            raise RedisConnectionError(f"Redis at {where} refused the login: {exc}") from exc
        except BaseException:  # a timeout or a cancelled connect: leave no socket open
            protocol.close()
            raise
        return protocol


def encode(args: tuple[bytes | str | int, ...]) -> bytes:
    """One command in RESP: an array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


_INCOMPLETE: Any = object()


def parse(buffer: bytes | bytearray, start: int = 0) -> tuple[Any, int]:
    """One reply from *buffer* at *start*: ``(reply, end)``, or ``(_INCOMPLETE, start)``
    when the buffer does not hold all of it yet.  An error reply is returned as a
    :class:`RedisReplyError` instance (``LOADING``, a server still reading its files
    after a restart, as a :class:`RedisConnectionError`: it is not there yet); a
    null as None.  Raises ValueError on bytes
    that are not RESP."""
    line_end = buffer.find(b"\r\n", start)
    if line_end < 0:
        return _INCOMPLETE, start
    kind, line, end = buffer[start], bytes(buffer[start + 1 : line_end]), line_end + 2
    if kind == 0x3A:  # ':' integer
        return int(line), end
    if kind == 0x2B:  # '+' simple string
        return line.decode(), end
    if kind == 0x2D:  # '-' error
        message = line.decode(errors="replace")
        if message.startswith("LOADING"):  # restarting from its files: not there yet
            return RedisConnectionError(message), end
        return RedisReplyError(message), end
    if kind == 0x24:  # '$' bulk string
        size = int(line)
        if size < 0:
            return None, end
        if len(buffer) < end + size + 2:
            return _INCOMPLETE, start
        return bytes(buffer[end : end + size]), end + size + 2
    if kind == 0x2A:  # '*' array
        count = int(line)
        if count < 0:
            return None, end
        items = []
        for _ in range(count):
            item, end = parse(buffer, end)
            if item is _INCOMPLETE:
                return _INCOMPLETE, start
            items.append(item)
        return items, end
    raise ValueError(f"not a RESP reply: {bytes(buffer[start:line_end])[:40]!r}")


class _RespProtocol(asyncio.Protocol):
    """The connection: writes commands, matches replies to waiting futures in order."""

    def __init__(self, timeout: float) -> None:
        self.open = False
        self._timeout = timeout
        self._buffer = bytearray()
        self._waiting: deque[tuple[asyncio.Future[Any], float]] = deque()
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.open = True

    def send(self, args: tuple[bytes | str | int, ...]) -> asyncio.Future[Any]:
        future = self._loop.create_future()
        if not self.open or self._transport is None:
            future.set_exception(RedisConnectionError("the Redis connection is closed"))
            return future
        self._transport.write(encode(args))
        self._waiting.append((future, self._loop.time()))
        if self._timer is None:
            self._timer = self._loop.call_later(self._timeout, self._check_timeout)
        return future

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = 0
        try:
            while end < len(self._buffer):
                reply, end_of_reply = parse(self._buffer, end)
                if reply is _INCOMPLETE:
                    break
                end = end_of_reply
                if not self._waiting:
                    raise ValueError("a reply to no command")
                future, _ = self._waiting.popleft()
                if future.done():  # its caller gave up on it
                    continue
                if isinstance(reply, (RedisReplyError, RedisConnectionError)):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)
        except ValueError as exc:
            self._fail(RedisConnectionError(f"Redis protocol error: {exc}"))
            return
        del self._buffer[:end]

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"Redis connection lost: {exc or 'closed'}"))

    def close(self) -> None:
        self._fail(RedisConnectionError("the Redis connection was closed"))

    def _check_timeout(self) -> None:
        """Fail the connection when its oldest command has waited too long; runs at
        most once per timeout while commands are pending (cheaper than a timer each)."""
        self._timer = None
        if not self._waiting:
            return
        waited = self._loop.time() - self._waiting[0][1]
        if waited >= self._timeout:
            self._fail(RedisConnectionError(f"no reply from Redis within {self._timeout} s"))
        else:
            self._timer = self._loop.call_later(self._timeout - waited, self._check_timeout)

    def _fail(self, error: RedisConnectionError) -> None:
        """Close the connection and fail every command still waiting for its reply."""
        self.open = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self._transport.abort()
        while self._waiting:
            future, _ = self._waiting.popleft()
            if not future.done():
                future.set_exception(error)


#: redis-py's URL options that tune its own sockets, pool, retries and decoding, not
#: where the server is or what it answers: this client has its own timeout, connection
#: and replies, and takes them as said nothing.
TUNING_OPTIONS = frozenset(
    {
        "socket_timeout",
        "socket_connect_timeout",
        "socket_keepalive",
        "socket_read_size",
        "health_check_interval",
        "retry_on_timeout",
        "retry_on_error",
        "max_connections",
        "timeout",
        "client_name",
        "protocol",
        "encoding",
        "encoding_errors",
        "decode_responses",
        "legacy_responses",
    }
)
#: redis-py's TLS options this client applies as redis-py does (:func:`tls_context`).
TLS_OPTIONS = frozenset(
    {
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_ca_data",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_password",
        "ssl_check_hostname",
        "ssl_min_version",
        "ssl_ciphers",
    }
)
_VERIFY_MODES = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def redacted_url(url: str) -> str:
    """A Redis URL without its user, password and options: scheme, host and port (or
    socket path), database."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def unknown_options(url: str) -> list[str]:
    """The options of Redis URL *url* this client cannot honour (besides ``db``)."""
    known = TUNING_OPTIONS | TLS_OPTIONS | {"db"}
    return sorted(name for name in parse_qs(urlsplit(url).query) if name not in known)


def _redis_py_checks_hostname() -> bool:
    """redis-py's default ``ssl_check_hostname`` (False before 6.0, True since; True
    without redis-py)."""
    try:
        import redis
    except ImportError:  # pragma: no cover - the budget's Redis extra installs it
        return True
    parameter = inspect.signature(redis.SSLConnection).parameters.get("ssl_check_hostname")
    return True if parameter is None else bool(parameter.default)


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "f", "false", "n", "no")
    return bool(value)


def tls_context(options: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context redis-py's ``SSLConnection`` builds from *options* (its
    ``ssl_*`` keyword arguments, or a URL's query options as strings): the system's
    trusted certificates and any given (``ssl_ca_certs``, ``ssl_ca_path``,
    ``ssl_ca_data``), a client certificate (``ssl_certfile``, ``ssl_keyfile``,
    ``ssl_password``), ``ssl_cert_reqs`` (``required`` by default; ``none``
    checks no certificate, as for many hosted Redis services),
    ``ssl_check_hostname`` (redis-py's default), ``ssl_min_version`` and
    ``ssl_ciphers``."""
    context = ssl.create_default_context()
    reqs = options.get("ssl_cert_reqs", "required")
    if reqs is None:
        reqs = "none"
    if isinstance(reqs, str):
        if reqs.lower() not in _VERIFY_MODES:
            raise ValueError(
                f"ssl_cert_reqs must be one of {', '.join(_VERIFY_MODES)}, not {reqs!r}"
            )
        mode = _VERIFY_MODES[reqs.lower()]
    else:
        mode = ssl.VerifyMode(reqs)
    check = options.get("ssl_check_hostname")
    context.check_hostname = (
        _redis_py_checks_hostname() if check is None else _flag(check)
    ) and mode != ssl.CERT_NONE
    context.verify_mode = mode
    certfile = options.get("ssl_certfile")
    if certfile:
        context.load_cert_chain(certfile, options.get("ssl_keyfile"), options.get("ssl_password"))
    cafile, capath, cadata = (options.get(f"ssl_ca_{name}") for name in ("certs", "path", "data"))
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    version = options.get("ssl_min_version")
    if version is not None:
        context.minimum_version = (
            ssl.TLSVersion[version] if isinstance(version, str) else ssl.TLSVersion(version)
        )
    if options.get("ssl_ciphers"):
        context.set_ciphers(options["ssl_ciphers"])
    return context


def _checked_tls(options: Mapping[str, Any]) -> ssl.SSLContext:
    """:func:`tls_context`, its errors (an unknown ``ssl_cert_reqs``, a certificate
    file that cannot be read) as ``ValueError`` naming the option."""
    try:
        return tls_context(options)
    except (KeyError, ValueError, OSError) as exc:  # ssl.SSLError is an OSError
        given = ", ".join(
            f"{name}={'***' if name == 'ssl_password' else options[name]}"
            for name in sorted(TLS_OPTIONS & set(options))
        )
        raise ValueError(f"TLS options not usable ({given}): {exc}") from exc


def address_from_url(url: str, timeout: float = 5.0) -> RedisAddress | None:
    """The address for :class:`PipelinedRedis` from a ``redis://``, ``rediss://`` or
    ``unix://`` URL (redis-py's URL forms and its options, as :data:`TLS_OPTIONS`
    and :data:`TUNING_OPTIONS` say), or None when the URL has options that client
    does not support (:func:`unknown_options`; then reservations use redis-py in a
    worker thread).  ``ValueError`` if a TLS option is malformed."""
    parts = urlsplit(url)
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    if unknown_options(url) or parts.scheme not in ("redis", "rediss", "unix"):
        return None
    db = query.get("db", "")
    if parts.scheme != "unix":
        db = db or parts.path.strip("/")
    try:
        number = int(db or 0)
        port = parts.port or 6379
    except ValueError:
        return None
    return RedisAddress(
        host=parts.hostname or "localhost",
        port=port,
        path=parts.path if parts.scheme == "unix" else None,
        tls=_checked_tls(query) if parts.scheme == "rediss" else None,
        # redis://user@host has a user name and no password: no login, as redis-py does.
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        db=number,
        timeout=timeout,
    )
