"""The script of the fleet's politeness ledger in Redis: one Lua file, ``ledger.lua``
beside this module, holding every function the fleet's Redis runs (units acquired and let go of,
holds, robots.txt locks, the shared request queue), with their arguments documented
there.  It is loaded once per server (``EVALSHA``, and ``EVAL`` the first time a
server lacks it), and a call names its function: ``ledger_call(client, "acquire",
[key], floor, lease, token)``.

Redis 5 or later: the functions read the server's clock (``TIME``) before writing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from .._redis import PipelinedRedis

#: The script's source, and its SHA-1 as Redis names it.
SOURCE = resources.files(__package__).joinpath("ledger.lua").read_text(encoding="utf-8")
SHA = hashlib.sha1(SOURCE.encode()).hexdigest()


async def ledger_call(
    client: PipelinedRedis, function: str, keys: Sequence[str], *args: bytes | str | int
) -> Any:
    """Run the ledger's *function* on *keys* and *args*; its reply."""
    return await client.run_script(SOURCE, SHA, keys, function, *args)
