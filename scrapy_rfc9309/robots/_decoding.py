"""Undo a response's ``Content-Encoding`` without ever holding more than a limit.

A 834-byte brotli body can inflate to 1 GiB, and encodings nest (``gzip`` inside
``gzip``).  Each layer here is decoded into at most ``limit`` bytes, so whatever a
site sends, a decoded robots.txt costs at most the limit (plus one compressed copy).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

#: Input is fed in pieces so that a corrupt stream keeps what decoded before the damage.
_PIECE = 16_384


def content_codings(header_values: list[bytes]) -> list[str]:
    """The codings of ``Content-Encoding`` header values, in the order applied."""
    return [
        coding.strip().lower()
        for value in header_values
        for coding in value.decode("latin-1").split(",")
        if coding.strip() and coding.strip().lower() != "identity"
    ]


def decode_bounded(body: bytes, codings: list[str], limit: int) -> tuple[bytes, list[str]]:
    """Decode *body* (encoded with *codings*, in the order applied) into at most *limit*
    bytes per layer.  Returns the decoded bytes and the codings left undone (an
    unknown coding stops decoding, as Scrapy's HttpCompressionMiddleware does).

    A corrupt or cut stream decodes as far as it goes; never raises for bad input.
    """
    remaining = list(codings)
    while remaining:
        decoder = _DECODERS.get(remaining[-1])
        if decoder is None:
            break
        body = decoder(body, limit)
        remaining.pop()
    return body, remaining


def _zlib(body: bytes, limit: int, wbits: int) -> bytes:
    out: list[bytes] = []
    size = 0
    decoder = zlib.decompressobj(wbits)
    data = body
    try:
        while data and size < limit:
            piece, data = data[:_PIECE], data[_PIECE:]
            while piece and size < limit:
                chunk = decoder.decompress(piece, limit - size)
                out.append(chunk)
                size += len(chunk)
                piece = decoder.unconsumed_tail
                if decoder.eof:  # the next gzip member, if any
                    data = decoder.unused_data + piece + data
                    piece = b""
                    decoder = zlib.decompressobj(wbits)
                    if not data.startswith(b"\x1f\x8b"):
                        data = b""
        if size < limit:
            out.append(decoder.flush()[: limit - size])
    except zlib.error:
        pass  # keep what decoded before the damage
    return b"".join(out)


def _gunzip(body: bytes, limit: int) -> bytes:
    return _zlib(body, limit, 16 + zlib.MAX_WBITS)


def _inflate(body: bytes, limit: int) -> bytes:
    # "deflate" is a zlib stream by the standard; some servers send raw deflate.
    if len(body) >= 2 and (body[0] * 256 + body[1]) % 31 == 0 and body[0] & 0x0F == 8:
        return _zlib(body, limit, zlib.MAX_WBITS)
    return _zlib(body, limit, -zlib.MAX_WBITS)


def _unbrotli(body: bytes, limit: int) -> bytes:
    try:
        import brotli
    except ImportError:  # Scrapy accepts either binding
        import brotlicffi as brotli
    out: list[bytes] = []
    size = 0
    decoder = brotli.Decompressor()
    try:
        chunk = decoder.process(body, output_buffer_limit=limit)
        while chunk and size < limit:
            out.append(chunk[: limit - size])
            size += len(out[-1])
            if decoder.is_finished():
                break
            chunk = decoder.process(b"", output_buffer_limit=limit - size)
    except brotli.error:
        pass
    return b"".join(out)


def _unzstd(body: bytes, limit: int) -> bytes:
    import io
    import sys

    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    out: list[bytes] = []
    size = 0
    with zstd.ZstdFile(io.BytesIO(body)) as reader:
        try:
            while size < limit:
                chunk = reader.read(min(_PIECE * 4, limit - size))
                if not chunk:
                    break
                out.append(chunk)
                size += len(chunk)
        except (EOFError, zstd.ZstdError):
            pass
    return b"".join(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _gunzip,
    "x-gzip": _gunzip,
    "deflate": _inflate,
    "br": _unbrotli,
    "zstd": _unzstd,
}
