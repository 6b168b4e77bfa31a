"""The RFC 9309 core: pure Python, no Scrapy or Twisted imports."""

from .access import AccessPolicy, FetchOutcome, RobotsEntry, outcome_for_status
from .lexer import DEFAULT_MAX_BYTES
from .parser import Group, GroupSelection, RobotsTxt, Rule, Verdict
from .useragent import product_token

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
    "outcome_for_status",
    "product_token",
]
