"""One-line enabling: ``ADDONS = {"scrapy_rfc9309.Addon": 500}``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as BuiltinRobotsTxtMiddleware

from .downloadermiddlewares.budget import DomainBudgetMiddleware
from .downloadermiddlewares.robotstxt import RobotsTxtMiddleware

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: Where the add-on puts the components, unless the user placed them already.
#: The robots middleware takes the built-in one's place, after OffsiteMiddleware (50).
ROBOTS_ORDER = 100
#: After HttpCacheMiddleware (900): cache hits never reach it and cost no budget.
BUDGET_ORDER = 950


class Addon:
    """Replaces Scrapy's built-in ``RobotsTxtMiddleware`` with this package's and
    adds the package's components, keeping any order the user already set."""

    def update_settings(self, settings: BaseSettings) -> None:
        name = "DOWNLOADER_MIDDLEWARES"
        settings.set_in_component_priority_dict(name, BuiltinRobotsTxtMiddleware, None)
        settings.setdefault_in_component_priority_dict(name, RobotsTxtMiddleware, ROBOTS_ORDER)
        # Active only with DOMAINBUDGET_ENABLED = True.
        settings.setdefault_in_component_priority_dict(name, DomainBudgetMiddleware, BUDGET_ORDER)
