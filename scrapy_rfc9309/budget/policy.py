"""Daily budget policy: the YAML/dict schema, domain resolution and the day.

Schema (``config/domains.yaml``)::

    default_policy:
      max_requests_per_day: 200   # 0 = unlimited
      max_pages_per_day: 100
      qps: 0.2                    # optional: at most 0.2 requests/s (a 5 s delay)
    allowlist:
      - domain: wikipedia.org     # covers en.wikipedia.org too; they share counters
        domain_category: trusted  # optional, informative
        max_requests_per_day: 500
        max_pages_per_day: 250
        delay: 1.5                # optional: seconds between requests

Errors name the source (file or setting), the line (YAML only) and the field.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    import yaml

DEFAULT_MAX_REQUESTS = 200
DEFAULT_MAX_PAGES = 100

_LIMIT_KEYS = {"max_requests_per_day", "max_pages_per_day", "qps", "delay"}
_ENTRY_KEYS = _LIMIT_KEYS | {"domain", "domain_category"}
_TOP_KEYS = {"default_policy", "allowlist"}


class PolicyError(ValueError):
    """A malformed policy; the message names the file or setting, line and field."""


@dataclass(frozen=True)
class DomainLimits:
    """The limits that apply to one host, and the counter they are kept under."""

    key: str  # the domain whose counters are used: an allowlist entry or a registrable domain
    max_requests_per_day: int  # 0 = unlimited
    max_pages_per_day: int  # 0 = unlimited
    delay: float | None = None  # seconds between requests, from ``delay`` or ``1 / qps``
    category: str | None = None


class BudgetPolicy:
    """Which limits apply to which host."""

    def __init__(self, default: DomainLimits, entries: dict[str, DomainLimits]) -> None:
        """*default* and *entries* (by domain) hold their limits; their keys are set
        per host by :meth:`limits_for`."""
        self.default = default
        self.entries = entries

    @classmethod
    def defaults(cls) -> BudgetPolicy:
        return cls(DomainLimits("", DEFAULT_MAX_REQUESTS, DEFAULT_MAX_PAGES), {})

    @classmethod
    def from_file(cls, path: str | Path) -> BudgetPolicy:
        """Load a YAML policy.  Plain YAML only: aliases (``*name``, ``<<:``) and
        explicit tags (``!!python/...``) are refused, and so are files over
        :data:`MAX_POLICY_BYTES` and duplicate keys, each naming the line."""
        source = str(path)
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise PolicyError(f"{source}: cannot read the policy file: {exc}") from None
        if len(raw) > MAX_POLICY_BYTES:
            raise PolicyError(
                f"{source}: {len(raw):,} bytes; a policy file holds at most {MAX_POLICY_BYTES:,}"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PolicyError(
                f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        import yaml  # PyYAML loads only for a policy file (1.5 MiB of a crawl's memory)

        try:
            _refuse_aliases_and_tags(text, source)
            node = yaml.compose(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f", line {mark.line + 1}" if mark is not None else ""
            # PyYAML's own text spans lines and quotes "<unicode string>": say the problem.
            problem = getattr(exc, "problem", None) or str(exc)
            context = getattr(exc, "context", None)
            what = f"{context}: {problem}" if context else problem
            raise PolicyError(f"{source}{where}: invalid YAML: {what}") from None
        lines: dict[tuple[Any, ...], int] = {}
        if node is None:  # empty, or comments only: most likely not the file meant
            raise PolicyError(
                f"{source}: the file holds no policy (write default_policy and allowlist; "
                f"for the built-in defaults, leave DOMAINBUDGET_POLICY_FILE unset)"
            )
        data = _to_python(node, (), lines, source)
        return cls.from_dict(data, source=source, lines=lines)

    @classmethod
    def from_dict(
        cls,
        data: Any,
        *,
        source: str = "DOMAINBUDGET_POLICY",
        lines: Mapping[tuple[Any, ...], int] | None = None,
    ) -> BudgetPolicy:
        check = _Checker(source, lines or {})
        if not isinstance(data, Mapping):
            check.fail((), "the policy must be a mapping with default_policy and allowlist")
        check.known_keys(data, (), _TOP_KEYS)
        default_data = data.get("default_policy") or {}
        check.mapping(default_data, ("default_policy",))
        check.known_keys(default_data, ("default_policy",), _LIMIT_KEYS)
        default = check.limits(default_data, ("default_policy",), None)
        entries: dict[str, DomainLimits] = {}
        first_index: dict[str, int] = {}  # domain -> its allowlist entry
        allowlist = data.get("allowlist") or []
        if not isinstance(allowlist, list):
            check.fail(("allowlist",), "must be a list of entries")
        for index, entry in enumerate(allowlist):
            path = ("allowlist", index)
            check.mapping(entry, path)
            check.known_keys(entry, path, _ENTRY_KEYS)
            domain = entry.get("domain")
            problem = domain_problem(domain)
            if problem is not None:
                check.fail((*path, "domain"), problem)
            category = entry.get("domain_category")
            if category is not None and not isinstance(category, str):
                check.fail((*path, "domain_category"), "must be a string")
            host = normalise_host(domain)
            if host in first_index:
                check.duplicate(("allowlist", first_index[host], "domain"), (*path, "domain"), host)
            first_index[host] = index
            entries[host] = check.limits(entry, path, default, category)
        return cls(default, entries)

    def max_delay(self) -> float:
        """The longest ``delay`` (or ``1 / qps``) any entry asks for (0: none)."""
        return max(limits.delay or 0.0 for limits in (self.default, *self.entries.values()))

    def limits_for(self, host: str) -> DomainLimits:
        """The limits for *host*: the most specific allowlist entry covering it, else
        the default policy counted per registrable domain.  IPs and ``localhost`` are
        hosts of their own: only an entry naming them exactly covers them."""
        host = normalise_host(host)
        labels = [host] if is_ip_or_local(host) else host.split(".")
        for start in range(len(labels)):
            candidate = ".".join(labels[start:])
            limits = self.entries.get(candidate)
            if limits is not None:
                return replace(limits, key=candidate)
        return replace(self.default, key=registrable_domain(host))


#: The largest daily limit (what every storage counts exactly).
MAX_PER_DAY = 10**12
#: The longest delay a policy may ask between two requests: a day.
MAX_DELAY = 86400.0


class _Checker:
    """Validation with errors that name the source, line and field."""

    def __init__(self, source: str, lines: Mapping[tuple[Any, ...], int]) -> None:
        self.source = source
        self.lines = lines

    def line(self, path: tuple[Any, ...]) -> int | None:
        """The line of *path*; a missing field has none: the line of what should
        contain it."""
        if not path:
            return None
        ends = range(len(path), -1, -1)
        return next((self.lines[path[:end]] for end in ends if path[:end] in self.lines), None)

    def fail(self, path: tuple[Any, ...], message: str) -> None:
        line = self.line(path)
        where = f", line {line}" if line is not None else ""
        field = ".".join(str(part) for part in path) or "(top level)"
        raise PolicyError(f"{self.source}{where}: {field}: {message}")

    def duplicate(self, first: tuple[Any, ...], again: tuple[Any, ...], domain: str) -> None:
        """Two allowlist entries name one domain: which would win is a guess."""
        line = self.line(first)
        where = f" (line {line})" if line is not None else ""
        field = ".".join(str(part) for part in first)
        self.fail(
            again,
            f"{domain!r} is already the domain of {field}{where}: merge the two entries",
        )

    def mapping(self, value: Any, path: tuple[Any, ...]) -> None:
        if not isinstance(value, Mapping):
            self.fail(path, "must be a mapping")

    def known_keys(self, value: Mapping[str, Any], path: tuple[Any, ...], keys: set[str]) -> None:
        for key in value:
            if key not in keys:
                self.fail((*path, key), f"unknown key (expected one of {', '.join(sorted(keys))})")

    def limits(
        self,
        data: Mapping[str, Any],
        path: tuple[Any, ...],
        inherit: DomainLimits | None,
        category: str | None = None,
    ) -> DomainLimits:
        def count(key: str, default: int) -> int:
            value = data.get(key, default)
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 <= value <= MAX_PER_DAY
            ):
                self.fail(
                    (*path, key),
                    f"must be a whole number from 0 (unlimited) to {MAX_PER_DAY:,}, not {value!r}",
                )
            return int(value)

        def positive(key: str, allow_zero: bool) -> float | None:
            value = data.get(key)
            if value is None:
                return None
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
                self.fail(
                    (*path, key), f"must be a number {'>=' if allow_zero else '>'} 0, not {value!r}"
                )
            return float(value)

        requests = count(
            "max_requests_per_day",
            inherit.max_requests_per_day if inherit else DEFAULT_MAX_REQUESTS,
        )
        pages = count(
            "max_pages_per_day", inherit.max_pages_per_day if inherit else DEFAULT_MAX_PAGES
        )
        delay = positive("delay", allow_zero=True)
        qps = positive("qps", allow_zero=False)
        if delay is not None and qps is not None:
            self.fail((*path, "qps"), "give either qps or delay, not both")
        if qps is not None:
            delay = 1 / qps
        if delay is not None and delay > MAX_DELAY:
            self.fail(
                (*path, "qps" if qps is not None else "delay"),
                f"asks for more than a day ({MAX_DELAY:,} s) between requests",
            )
        if delay is None and inherit is not None:
            delay = inherit.delay
        return DomainLimits("", requests, pages, delay, category)


#: A policy file larger than this is refused (thousands of entries fit in far less).
MAX_POLICY_BYTES = 1 << 20


def _refuse_aliases_and_tags(text: str, source: str) -> None:
    """One linear pass over the YAML events: an alias can expand exponentially (a
    382-byte file to gigabytes), and an explicit tag asks for arbitrary types."""
    import yaml

    for event in yaml.parse(text):
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.AliasEvent):
            raise PolicyError(f"{source}, line {line}: YAML aliases are not allowed in a policy")
        tag = getattr(event, "tag", None)
        implicit = getattr(event, "implicit", True)
        if tag is not None and not (
            implicit is True or (isinstance(implicit, tuple) and any(implicit))
        ):
            raise PolicyError(
                f"{source}, line {line}: YAML tags ({tag}) are not allowed in a policy"
            )


def _to_python(
    node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int], source: str
) -> Any:
    """Turn a composed YAML node into Python values, recording each path's line."""
    import yaml

    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        result = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                where = ".".join(map(str, path)) or "(top level)"
                raise PolicyError(
                    f"{source}, line {key_node.start_mark.line + 1}: {where}: keys must be "
                    f"plain names (like max_pages_per_day), not a {key_node.id}"
                )
            key = _scalar(key_node, source)
            field = (*path, key)
            if key in result:
                raise PolicyError(
                    f"{source}, line {key_node.start_mark.line + 1}: "
                    f"{'.'.join(map(str, field))}: duplicate key"
                )
            result[key] = _to_python(value_node, field, lines, source)
            lines[field] = key_node.start_mark.line + 1  # a field's line is its key's
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _to_python(item, (*path, index), lines, source) for index, item in enumerate(node.value)
        ]
    return _scalar(node, source)


def _scalar(node: yaml.Node, source: str) -> Any:
    import yaml

    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError) as exc:  # e.g. a date that does not exist
        raise PolicyError(
            f"{source}, line {node.start_mark.line + 1}: invalid value: {exc}"
        ) from None


_HOST_NAME = re.compile(
    r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*"
)


def domain_problem(domain: Any) -> str | None:
    """What is wrong with an allowlist ``domain`` value (a host name or IP address,
    optionally ``*.``-prefixed), with what to write instead; ``None`` if nothing.

    A URL or a port is refused, not stripped: budgets are counted per host whatever
    the scheme or port, and a value that silently never matched cost users a day."""
    if not isinstance(domain, str) or not domain.strip():
        return "must be a domain name like 'example.com'"
    text = domain.strip()
    if "/" in text or "?" in text or "#" in text or "@" in text:
        host = urlsplit(text if "//" in text else "//" + text).hostname
        instead = f": write domain: {host}" if host else ""
        return f"must be a host name, not a URL ({text!r}){instead}"
    host = normalise_host(text)
    if is_ip_or_local(host):
        return None
    name, colon, port = host.rpartition(":")
    if colon and port.isdigit() and name:
        return (
            f"must be a host name without a port ({text!r}); budgets count per host "
            f"whatever the port: write domain: {name.strip('[]')}"
        )
    if _HOST_NAME.fullmatch(host) is None:
        return f"must be a domain name like 'example.com', not {text!r}"
    return None


def normalise_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("*."):
        host = host[2:]
    return host.lstrip(".").strip("[]")


def is_ip_or_local(host: str) -> bool:
    """Whether *host* is an IP address or ``localhost`` (a unit and a budget of its own)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=1)
def _extractor() -> Any:
    import tldextract

    # The public suffix list bundled with tldextract: no network fetch at run time.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@lru_cache(maxsize=65536)
def registrable_domain(host: str) -> str:
    """``en.wikipedia.org`` -> ``wikipedia.org``; ``a.b.co.uk`` -> ``b.co.uk``.
    IP addresses, ``localhost`` and hosts without a registrable part stay as they are."""
    host = normalise_host(host)
    if is_ip_or_local(host):
        return host
    return str(_extractor()(host).top_domain_under_public_suffix) or host


def zone(name: str) -> ZoneInfo:
    """The IANA time zone *name*; a :class:`PolicyError` naming DOMAINBUDGET_TIMEZONE if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise PolicyError(f"DOMAINBUDGET_TIMEZONE: unknown time zone {name!r}") from None


def day_of(timestamp: float, tz: ZoneInfo) -> str:
    """The calendar day (``YYYY-MM-DD``) of a Unix *timestamp* in *tz*."""
    return datetime.fromtimestamp(timestamp, tz).date().isoformat()
