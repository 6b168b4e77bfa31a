"""The RFC 9309 core: pure Python, no Scrapy or Twisted imports."""

from ._access import MAX_CACHE_TTL, AccessPolicy, FetchOutcome, RobotsEntry, outcome_for_status
from ._decoding import content_codings, decode_bounded
from ._fetchplan import FETCHABLE_SCHEMES, FetchPlan, is_redirect
from ._lexer import DEFAULT_MAX_BYTES, decode, split_lines
from ._model import Group, GroupSelection, Rule, Verdict
from ._pagedirectives import html_head, page_directives
from ._pattern import Pattern, compile_pattern
from ._preferences import NO_PREFERENCES, USE_NAMES, Preferences, categories_of, parse_preference
from ._robotstxt import RobotsTxt, path_of
from ._stored import RedisRobotsStore, SQLiteRobotsStore, StoredRobots, StoreError
from ._useragent import is_rfc_token, product_token

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FETCHABLE_SCHEMES",
    "MAX_CACHE_TTL",
    "NO_PREFERENCES",
    "USE_NAMES",
    "AccessPolicy",
    "FetchOutcome",
    "FetchPlan",
    "Group",
    "GroupSelection",
    "Pattern",
    "Preferences",
    "RedisRobotsStore",
    "RobotsEntry",
    "RobotsTxt",
    "Rule",
    "SQLiteRobotsStore",
    "StoreError",
    "StoredRobots",
    "Verdict",
    "categories_of",
    "compile_pattern",
    "content_codings",
    "decode",
    "decode_bounded",
    "html_head",
    "is_redirect",
    "is_rfc_token",
    "outcome_for_status",
    "page_directives",
    "parse_preference",
    "path_of",
    "product_token",
    "split_lines",
]
