"""Backing off when a site says so (a 429 or 503 answer, ``Retry-After``): how long
to hold each host, and what was held.  Pure Python: the caller reads the clocks and
keeps requests from starting."""

from __future__ import annotations

from ._holds import Incident, UnitBackoff, UnitRecord
from ._retryafter import RetryAfter, parse_retry_after

__all__ = ["Incident", "RetryAfter", "UnitBackoff", "UnitRecord", "parse_retry_after"]
