"""The budget pieces the components share (the middleware, the throttle, ``scrapy
budget``): the policy and the storage from the settings, and the clock of the day."""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.utils.conf import closest_scrapy_cfg
from scrapy.utils.misc import load_object

from ..._redis import redacted_url
from ..._settings import (
    BUDGET_DEFAULTS,
    SettingError,
    choice,
    data_file,
    with_defaults,
)
from ...budget.policy import BudgetPolicy, PolicyError, zone
from ...budget.storage import MemoryStorage, RedisStorage, SQLiteStorage, StorageError

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from scrapy.settings import BaseSettings

    from ...budget.storage import BudgetStorage


@dataclass(frozen=True)
class BudgetSettings:
    """The budget middleware's settings (``DOMAINBUDGET_*``), validated: the policy
    loaded, the time zone of the day, what a storage failure does, and the settings
    (defaults filled in) the storage is built from."""

    policy: BudgetPolicy
    tz: ZoneInfo
    #: ``DOMAINBUDGET_ON_STORAGE_ERROR = "deny"``: a request the storage cannot
    #: count is dropped (the default, ``"allow"``, lets it through).
    fail_closed: bool
    settings: BaseSettings

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BudgetSettings:
        filled = budget_settings(settings)
        return cls(
            policy=load_policy(filled),
            tz=zone(filled.get("DOMAINBUDGET_TIMEZONE")),
            fail_closed=choice(filled, "DOMAINBUDGET_ON_STORAGE_ERROR", ("allow", "deny"))
            == "deny",
            settings=filled,
        )

    def build_storage(self) -> BudgetStorage:
        return build_storage(self.settings)

    def describe_store(self) -> str:
        """Which store the counts are kept in, in words."""
        return describe_store(self.settings)

    def describe(self) -> str:
        """Which policy, store and time zone the crawl uses, in words."""
        return (
            f"{describe_policy(self.settings)}; counted in {describe_store(self.settings)};"
            f" days in {self.tz.key}"
        )


def unix_time() -> float:
    """The current Unix time (a function of its own so that tests can move the day)."""
    return time.time()


def load_policy(settings: BaseSettings) -> BudgetPolicy:
    """The policy from DOMAINBUDGET_POLICY_FILE or DOMAINBUDGET_POLICY, else the defaults.

    A relative file path is the project's (next to ``scrapy.cfg``), so ``scrapy crawl``
    works from any directory of the project.  A file is read once however many
    components ask (until it changes)."""
    path = settings.get("DOMAINBUDGET_POLICY_FILE")
    inline = settings.get("DOMAINBUDGET_POLICY")
    if path and inline:
        raise PolicyError(
            "set DOMAINBUDGET_POLICY_FILE or DOMAINBUDGET_POLICY, not both (on the command "
            "line, -s DOMAINBUDGET_POLICY_FILE= clears the project's file)"
        )
    if path:
        resolved = _project_path(path)
        try:
            stat = resolved.stat()
        except OSError as exc:
            raise PolicyError(f"{path}: cannot read the policy file: {exc}") from None
        return _policy_file(str(resolved), stat.st_mtime_ns, stat.st_size)
    if inline is not None:
        if isinstance(inline, str):  # -s DOMAINBUDGET_POLICY='{"default_policy": ...}'
            try:
                inline = json.loads(inline)
            except ValueError as exc:
                hint = ""
                if inline.strip().lower().endswith((".yaml", ".yml", ".json")):
                    hint = f"; to name a policy file, set DOMAINBUDGET_POLICY_FILE = {inline!r}"
                raise PolicyError(f"DOMAINBUDGET_POLICY: not a JSON object: {exc}{hint}") from None
        data = inline.copy_to_dict() if hasattr(inline, "copy_to_dict") else inline
        return BudgetPolicy.from_dict(data)
    return BudgetPolicy.defaults()


def describe_policy(settings: BaseSettings) -> str:
    """Where the budget policy comes from, in words."""
    path = settings.get("DOMAINBUDGET_POLICY_FILE")
    if path:
        return f"policy file {_project_path(path)}"
    if settings.get("DOMAINBUDGET_POLICY") is not None:
        return "policy from DOMAINBUDGET_POLICY"
    return "the default policy (no DOMAINBUDGET_POLICY_FILE or DOMAINBUDGET_POLICY)"


def _project_path(path: str) -> Path:
    """*path*, relative to the project (next to ``scrapy.cfg``) unless absolute."""
    resolved = Path(path)
    project = closest_scrapy_cfg()
    if not resolved.is_absolute() and project:
        resolved = Path(project).parent / resolved
    return resolved


@functools.lru_cache(maxsize=4)
def _policy_file(path: str, mtime_ns: int, size: int) -> BudgetPolicy:
    return BudgetPolicy.from_file(path)


def budget_settings(settings: BaseSettings) -> BaseSettings:
    """*settings* with this package's budget defaults filled in, the SQLite file
    defaulting to ``.scrapy/domainbudget.sqlite`` in the project."""
    filled = with_defaults(settings, BUDGET_DEFAULTS)
    if filled.get("DOMAINBUDGET_SQLITE_PATH") is None:
        filled.set("DOMAINBUDGET_SQLITE_PATH", data_file("domainbudget.sqlite"))
    return filled


def build_storage(settings: BaseSettings) -> BudgetStorage:
    """The storage named by DOMAINBUDGET_STORAGE (*settings* as from :func:`budget_settings`).

    A storage that cannot start (a missing package, a file that cannot be opened) is a
    :class:`SettingError`: the crawl stops at start-up with its one-line message."""
    name = settings.get("DOMAINBUDGET_STORAGE")
    storage_cls = storage_class(settings)
    try:
        return storage_cls.from_settings(settings)
    except StorageError as exc:
        hint = (
            " (move the file aside for a new one, or set DOMAINBUDGET_SQLITE_PATH)"
            if issubclass(storage_cls, SQLiteStorage)
            else f" (DOMAINBUDGET_STORAGE = {name!r})"
        )
        raise SettingError(f"the budget storage failed: {exc}{hint}") from None


def storage_class(settings: BaseSettings) -> type[BudgetStorage]:
    """The class DOMAINBUDGET_STORAGE names (an import path or the class itself)."""
    name = settings.get("DOMAINBUDGET_STORAGE")
    try:
        return load_object(name)  # type: ignore[no-any-return]
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        raise SettingError(f"DOMAINBUDGET_STORAGE: cannot load {name!r}: {exc}") from None


def describe_store(settings: BaseSettings) -> str:
    """Which store the counts are kept in (*settings* as from :func:`budget_settings`),
    for the user to check it is the one they meant; never a password."""
    cls = storage_class(settings)
    if issubclass(cls, SQLiteStorage):
        return f"SQLite {Path(settings.get('DOMAINBUDGET_SQLITE_PATH')).absolute()}"
    if issubclass(cls, RedisStorage):
        return f"Redis {redacted_url(str(settings.get('DOMAINBUDGET_REDIS_URL')))}"
    if issubclass(cls, MemoryStorage):
        return "memory (this process only, not kept)"
    return f"{cls.__module__}.{cls.__qualname__}"
