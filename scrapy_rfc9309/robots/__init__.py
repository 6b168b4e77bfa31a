"""The RFC 9309 core: pure Python, no Scrapy or Twisted imports."""

from ._access import AccessPolicy, FetchOutcome, RobotsEntry, outcome_for_status
from ._lexer import DEFAULT_MAX_BYTES
from ._parser import Group, GroupSelection, RobotsTxt, Rule, Verdict
from ._useragent import is_rfc_token, product_token

__all__ = [
    "DEFAULT_MAX_BYTES",
    "AccessPolicy",
    "FetchOutcome",
    "Group",
    "GroupSelection",
    "RobotsEntry",
    "RobotsTxt",
    "Rule",
    "Verdict",
    "is_rfc_token",
    "outcome_for_status",
    "product_token",
]
