"""Reading and validating the plugin's settings; errors name the setting."""

from __future__ import annotations

import json
import logging
import math
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

import scrapy
from scrapy.exceptions import NotConfigured
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.asyncio import is_asyncio_available
from scrapy.utils.misc import load_object
from scrapy.utils.project import data_path

from ._redis import TLS_OPTIONS, address_from_url, redacted_url, unknown_options
from .budget.policy import PolicyError
from .robots import (
    DEFAULT_MAX_BYTES,
    MAX_CACHE_TTL,
    USE_NAMES,
    AccessPolicy,
    compile_pattern,
    is_rfc_token,
    path_of,
    product_token,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings


class SettingError(ValueError):
    """A setting has a value the plugin cannot use; the message names the setting."""


#: Errors in what the user configured: each message names the setting, or the file,
#: line and field, and a traceback would only bury it.
CONFIGURATION_ERRORS = (SettingError, PolicyError)


class _ConfigurationErrorsInOneLine(logging.Filter):
    """Scrapy reports an exception that stops a crawl at start-up as a traceback of 40
    to 70 lines, under asyncio's "Task exception was never retrieved" or Twisted's
    "Unhandled error in Deferred".  For a configuration error that is a message for
    the user, not a bug: log its message alone, which is then the last line printed."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, CONFIGURATION_ERRORS):
            record.name = "scrapy_rfc9309"
            record.msg, record.args = "The crawl cannot start: %s", (error,)
            record.exc_info = record.exc_text = None
            return True
        # Twisted also logs the same failure as text, traceback included: once is enough.
        text = record.getMessage() if record.name == "twisted" else ""
        return not any(
            f"{cls.__module__}.{cls.__qualname__}: " in text for cls in CONFIGURATION_ERRORS
        )


def report_configuration_errors_in_one_line() -> None:
    """Have the crawl starting now log this package's configuration errors as their
    message alone (see :class:`_ConfigurationErrorsInOneLine`).  Called by each
    component as it is built, never on import; the filter touches no other record."""
    for name in ("asyncio", "twisted"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _ConfigurationErrorsInOneLine) for f in logger.filters):
            logger.addFilter(_ConfigurationErrorsInOneLine())


def number(
    settings: BaseSettings,
    name: str,
    minimum: float = 0,
    maximum: float | None = None,
    *,
    above: bool = False,
) -> float:
    """The number setting *name*, at least *minimum* (more than it, with *above*) and
    at most *maximum*."""
    value = settings.get(name)
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SettingError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(result):
        raise SettingError(f"{name} must be a finite number, not {value!r}")
    too_small = result <= minimum if above else result < minimum
    if too_small or (maximum is not None and result > maximum):
        low = f"more than {_written(minimum)}" if above else f"at least {_written(minimum)}"
        high = f" and at most {_written(maximum)}" if maximum is not None else ""
        raise SettingError(f"{name} must be {low}{high}, not {value!r}")
    return result


def _written(number: float) -> str:
    """*number* as a person writes it: ``512000``, ``0.5``."""
    return f"{int(number)}" if number == int(number) else f"{number:g}"


def flag(settings: BaseSettings, name: str) -> bool:
    """A boolean setting (``True``/``False``, ``1``/``0``, ``"true"``/``"false"``)."""
    try:
        return settings.getbool(name)
    except ValueError:
        raise SettingError(f"{name} must be True or False, not {settings.get(name)!r}") from None


def choice(settings: Any, name: str, choices: tuple[str, ...]) -> str:
    value = settings.get(name)
    if value not in choices:
        raise SettingError(f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}")
    return str(value)


def compile_exclusions(
    entries: Any, name: str = "RFC9309_EXCLUDE_PATHS"
) -> Callable[[str], str | None]:
    """A matcher for the operator's deny list: robots-style path patterns, or regular
    expressions written ``re:...``, matched against the canonical path + query.
    It returns the entry that matched, or ``None``."""
    if not isinstance(entries, (str, list, tuple)):
        raise SettingError(f"{name} must be a list of path patterns, not {entries!r}")
    entries = list_value(entries, name)
    patterns: list[tuple[str, Callable[[str], Any]]] = []
    for entry in entries:
        if not isinstance(entry, str) or not entry:
            raise SettingError(f"{name}: entries must be non-empty strings, not {entry!r}")
        if entry.startswith("re:"):
            try:
                patterns.append((entry, re.compile(entry[3:]).search))
            except re.error as exc:
                raise SettingError(f"{name}: invalid regular expression {entry!r}: {exc}") from None
        else:
            pattern = entry if entry.startswith(("/", "*")) else "/" + entry
            patterns.append((entry, compile_pattern(pattern).matches))

    def excluded(url: str) -> str | None:
        path = path_of(url)
        for entry, matches in patterns:
            if matches(path):
                return entry
        return None

    return excluded


@dataclass(frozen=True)
class RobotsSettings:
    """The robots middleware's settings, validated."""

    policy: AccessPolicy
    timeout: float
    max_bytes: int
    max_redirects: int
    cache_size: int
    cache_max_bytes: int
    lenient: bool
    user_agent: str | None
    #: The product token robots.txt groups are matched against (see configured_token).
    token: str
    excluded: Callable[[str], str | None]
    #: With backing off on, a robots.txt answered "slow down" is fetched again after
    #: its ``Retry-After`` (see :class:`BackoffSettings`).
    backoff: BackoffSettings | None = None
    #: Where robots.txt results are kept across restarts (an SQLite file); ``None``
    #: when they are not (``RFC9309_PERSISTENT_CACHE = False``).
    persistent_path: str | None = None
    #: The uses the crawl is for (``RFC9309_CONTENT_USES``): a request whose URL the
    #: site's preferences refuse for one of them is dropped.
    content_uses: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RobotsSettings:
        policy = AccessPolicy(
            # 0 would fetch robots.txt again before almost every request.
            cache_ttl=number(settings, "RFC9309_CACHE_TTL", 0, MAX_CACHE_TTL, above=True),
            failure_ttl=number(settings, "RFC9309_FAILURE_TTL", 0, MAX_CACHE_TTL),
            unreachable_allows=choice(settings, "RFC9309_UNREACHABLE", ("disallow", "allow"))
            == "allow",
        )
        return cls(
            policy=policy,
            timeout=number(settings, "RFC9309_TIMEOUT", 0.001, 3600),
            max_bytes=int(number(settings, "RFC9309_MAX_BYTES", DEFAULT_MAX_BYTES, 1 << 26)),
            max_redirects=int(number(settings, "RFC9309_MAX_REDIRECTS", 0, 20)),
            cache_size=int(number(settings, "RFC9309_CACHE_SIZE", 1, 10**8)),
            cache_max_bytes=int(number(settings, "RFC9309_CACHE_MAX_BYTES", 1, 1 << 50)),
            lenient=flag(settings, "RFC9309_LENIENT"),
            user_agent=settings.get("ROBOTSTXT_USER_AGENT") or None,
            token=configured_token(settings),
            excluded=compile_exclusions(settings.get("RFC9309_EXCLUDE_PATHS")),
            backoff=BackoffSettings.from_settings(settings),
            content_uses=_content_uses(settings.get("RFC9309_CONTENT_USES")),
            persistent_path=(
                str(settings.get("RFC9309_PERSISTENT_CACHE_PATH") or data_file(PERSISTENT_FILE))
                if flag(settings, "RFC9309_PERSISTENT_CACHE")
                else None
            ),
        )


def data_file(name: str) -> str:
    """The path of file *name* in the project's ``.scrapy`` directory (Scrapy's
    ``data_path``).  A project without ``scrapy.cfg`` (its settings module found
    through ``SCRAPY_SETTINGS_MODULE`` alone) has no such directory: then
    ``.scrapy`` in the current directory, where Scrapy keeps data outside a project."""
    try:
        return str(data_path(name))
    except NotConfigured:
        return str(Path.cwd() / ".scrapy" / name)


def _content_uses(value: Any) -> tuple[str, ...]:
    uses = list_value(value, "RFC9309_CONTENT_USES")
    if not all(isinstance(use, str) for use in uses):
        raise SettingError(
            f"RFC9309_CONTENT_USES must be a list of usage categories (e.g. ['train-ai']), "
            f"not {value!r}"
        )
    return tuple(use.strip() for use in uses if use.strip())


def use_mistakes(uses: tuple[str, ...]) -> list[str]:
    """The names in ``RFC9309_CONTENT_USES`` that name no known use (a typo matches
    only a category of that exact name, which no site writes)."""
    known = ", ".join(sorted(USE_NAMES))
    return [
        f"RFC9309_CONTENT_USES: {use!r} is not a known use, and is only matched as a "
        f"category of that exact name; the known ones: {known}"
        for use in uses
        if use not in USE_NAMES
    ]


def list_value(value: Any, name: str) -> list[Any]:
    """A list setting's value: a list or tuple, a JSON list (``-s NAME='[429, 503]'``)
    or comma-separated text (``-s NAME=429,503``, as Scrapy's ``getlist`` reads it)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise SettingError(
                    f"{name}: {value!r} is not a JSON list; write it as JSON "
                    f'(-s {name}=\'["a", "b"]\') or comma-separated (-s {name}=a,b)'
                ) from None
        else:
            value = [item.strip() for item in text.split(",") if item.strip()]
    if not isinstance(value, (list, tuple)):
        raise SettingError(f"{name} must be a list, not {value!r}")
    return list(value)


def _slot_options(settings: BaseSettings, option: str) -> dict[str, float]:
    """Each ``DOWNLOAD_SLOTS`` entry's *option*, a number of at least 0."""
    try:
        slots = settings.getdict("DOWNLOAD_SLOTS")
    except ValueError:
        raise SettingError(
            f"DOWNLOAD_SLOTS must be a dict of slot options, not {settings.get('DOWNLOAD_SLOTS')!r}"
        ) from None
    found = {}
    for key, options in slots.items():
        if not isinstance(options, dict):
            raise SettingError(f"DOWNLOAD_SLOTS[{key!r}] must be a dict, not {options!r}")
        if option in options:
            name = f"DOWNLOAD_SLOTS[{key!r}][{option!r}]"
            found[key] = number({name: options[option]}, name, 0)  # type: ignore[arg-type]
    return found


def configured_delays(settings: BaseSettings) -> tuple[float, dict[str, float]]:
    """The delay new slots get from the settings (``DOWNLOAD_DELAY``), and the slots
    that ``DOWNLOAD_SLOTS`` gives another one; a value that is no number of seconds
    is a :class:`SettingError` naming it."""
    return number(settings, "DOWNLOAD_DELAY", 0), _slot_options(settings, "delay")


def spider_download_delay(crawler: Crawler) -> float | None:
    """The spider's ``download_delay`` attribute where Scrapy's downloader reads it
    itself, winning over ``DOWNLOAD_DELAY`` (before Scrapy 2.19, which turns it into
    the setting); None where it does not."""
    spider = crawler.spider if crawler.spider is not None else crawler.spidercls
    if scrapy.version_info >= (2, 19) or not hasattr(spider, "download_delay"):
        return None
    value = spider.download_delay
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise SettingError(f"The spider's download_delay must be seconds, not {value!r}")
    return float(value)


def configured_concurrency(settings: BaseSettings) -> tuple[int, dict[str, int]]:
    """The concurrency new slots get (``CONCURRENT_REQUESTS_PER_IP`` when set: Scrapy
    then gives it to every slot, else ``CONCURRENT_REQUESTS_PER_DOMAIN``), and the
    slots that ``DOWNLOAD_SLOTS`` gives another one."""
    per_slot = _slot_options(settings, "concurrency")
    per_ip = settings.getint("CONCURRENT_REQUESTS_PER_IP")  # as Scrapy's downloader reads it
    concurrency = per_ip or number(settings, "CONCURRENT_REQUESTS_PER_DOMAIN", 0)
    return int(concurrency), {key: int(value) for key, value in per_slot.items()}


#: A fleet's hold on a host outlives the request's download timeout by this much
#: (seconds): a process killed mid-request holds its hosts no longer.
LEASE_MARGIN = 5.0


@dataclass(frozen=True)
class CrawlDelaySettings:
    """The Crawl-delay throttle's settings (``CRAWLDELAY_*``, ``BACKOFF_*``,
    ``FLEET_REDIS_URL`` and the Scrapy settings it reads), validated."""

    max_delay: float
    #: Every this many seconds, one INFO line of what the units wait for (0: never):
    #: Scrapy's ``LOGSTATS_INTERVAL`` unless ``CRAWLDELAY_LIVE_VIEW`` is off.
    live_view_every: float
    #: What one floor spaces: ``"host"`` or ``"domain"`` (``CRAWLDELAY_UNIT``).
    unit: str
    fleet_url: str | None
    #: The longest a fleet holds a host for one request (``DOWNLOAD_TIMEOUT`` + margin).
    lease: float
    #: A robots.txt decision pending longer than this (seconds) is a stall, logged:
    #: each hop of the fetch may take its timeout and wait a floor.
    stall_after: float
    backoff: BackoffSettings | None
    default_delay: float
    slot_delays: dict[str, float]
    user_agent: str | None
    default_user_agent: str

    @classmethod
    def from_settings(
        cls, settings: BaseSettings, spider_delay: Callable[[], float | None] = lambda: None
    ) -> CrawlDelaySettings | None:
        """The settings, or ``None`` when ``CRAWLDELAY_ENABLED`` is off; *spider_delay*
        (:func:`spider_download_delay`), if it gives one, is the configured delay: it is
        asked only with the throttle on (off, the spider's attribute is Scrapy's own)."""
        settings = with_defaults(settings, CRAWLDELAY_DEFAULTS)
        if not flag(settings, "CRAWLDELAY_ENABLED"):
            return None
        try:
            max_delay = number(settings, "CRAWLDELAY_MAX_DELAY", 0, 86400, above=True)
        except SettingError as exc:
            raise SettingError(
                f"{exc} (it caps the Crawl-delay obeyed, in seconds); to ignore "
                f"Crawl-delay, set CRAWLDELAY_ENABLED = False"
            ) from None
        default_delay, slot_delays = configured_delays(settings)
        own = spider_delay()
        if own is not None:
            default_delay = own
        robots = with_defaults(settings, ROBOTS_DEFAULTS)
        hop = max(settings.getfloat("DOWNLOAD_TIMEOUT"), robots.getfloat("RFC9309_TIMEOUT"))
        hops = robots.getint("RFC9309_MAX_REDIRECTS") + 1
        live = flag(settings, "CRAWLDELAY_LIVE_VIEW")
        return cls(
            max_delay=max_delay,
            live_view_every=number(settings, "LOGSTATS_INTERVAL", 0) if live else 0.0,
            stall_after=(hop + max(max_delay, default_delay)) * hops,
            unit=choice(settings, "CRAWLDELAY_UNIT", CRAWLDELAY_UNITS),
            fleet_url=fleet_url(settings),
            lease=settings.getfloat("DOWNLOAD_TIMEOUT") + LEASE_MARGIN,
            backoff=BackoffSettings.from_settings(settings),
            default_delay=default_delay,
            slot_delays=slot_delays,
            user_agent=settings.get("ROBOTSTXT_USER_AGENT") or None,
            default_user_agent=settings.get("USER_AGENT") or "",
        )


@dataclass(frozen=True)
class BackoffSettings:
    """Backing off when a site says so (``BACKOFF_*``), validated."""

    codes: frozenset[int]
    max_retry_after: float
    start: float
    maximum: float
    forgive_after: float
    delay: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BackoffSettings | None:
        """The settings, or ``None`` when ``BACKOFF_ENABLED`` is off."""
        settings = with_defaults(settings, BACKOFF_DEFAULTS)
        if not flag(settings, "BACKOFF_ENABLED"):
            return None
        codes = settings.get("BACKOFF_HTTP_CODES")
        try:
            parsed = frozenset(int(code) for code in list_value(codes, "BACKOFF_HTTP_CODES"))
        except (TypeError, ValueError):
            parsed = frozenset({0})
        if not all(100 <= code <= 599 for code in parsed):
            raise SettingError(
                f"BACKOFF_HTTP_CODES must be a list of HTTP status codes (e.g. [429, 503], "
                f"or -s BACKOFF_HTTP_CODES=429,503), not {codes!r}"
            )
        start = number(settings, "BACKOFF_START", 0, 10**9)
        maximum = number(settings, "BACKOFF_MAX", 0, 10**9)
        if maximum < start:
            raise SettingError(
                f"BACKOFF_MAX ({_written(maximum)} s) must be at least BACKOFF_START "
                f"({_written(start)} s): a backoff starts at BACKOFF_START and doubles up to "
                f"BACKOFF_MAX"
            )
        return cls(
            codes=parsed,
            max_retry_after=number(settings, "BACKOFF_MAX_RETRY_AFTER", 0, 10**9),
            start=start,
            maximum=maximum,
            forgive_after=number(settings, "BACKOFF_FORGIVE_AFTER", 0, 10**9),
            delay=number(settings, "BACKOFF_DELAY", 0.001, 86400),
        )


#: The file robots.txt results are kept in, in the project's ``.scrapy`` directory.
PERSISTENT_FILE = "rfc9309-robots.sqlite"

# Defaults of every setting of the package, by component (the components fill them
# in with with_defaults(); the add-on leaves them alone).

ROBOTS_DEFAULTS: dict[str, Any] = {
    "RFC9309_CACHE_TTL": 3600,
    "RFC9309_FAILURE_TTL": 600,
    "RFC9309_UNREACHABLE": "disallow",
    "RFC9309_TIMEOUT": 10,
    "RFC9309_MAX_BYTES": DEFAULT_MAX_BYTES,
    "RFC9309_MAX_REDIRECTS": 5,
    "RFC9309_CACHE_SIZE": 10_000,
    "RFC9309_CACHE_MAX_BYTES": 256 * 2**20,
    "RFC9309_LENIENT": True,
    "RFC9309_EXCLUDE_PATHS": [],
    "RFC9309_CONTENT_USES": [],
    "RFC9309_PERSISTENT_CACHE": True,
    "RFC9309_PERSISTENT_CACHE_PATH": None,  # None: .scrapy/rfc9309-robots.sqlite
}


BUDGET_DEFAULTS: dict[str, Any] = {
    "DOMAINBUDGET_ENABLED": False,
    "DOMAINBUDGET_POLICY_FILE": None,
    "DOMAINBUDGET_POLICY": None,
    "DOMAINBUDGET_TIMEZONE": "UTC",
    "DOMAINBUDGET_STORAGE": "scrapy_rfc9309.budget.storage.SQLiteStorage",
    "DOMAINBUDGET_SQLITE_PATH": None,  # None: .scrapy/domainbudget.sqlite in the project
    "DOMAINBUDGET_REDIS_URL": "redis://localhost:6379/0",
    "DOMAINBUDGET_ON_STORAGE_ERROR": "allow",
}


#: What a floor may space (``CRAWLDELAY_UNIT``).
CRAWLDELAY_UNITS = ("host", "domain")

CRAWLDELAY_DEFAULTS: dict[str, Any] = {
    "CRAWLDELAY_ENABLED": False,
    "CRAWLDELAY_MAX_DELAY": 60,
    "CRAWLDELAY_UNIT": "host",
    "CRAWLDELAY_SITES": [],
    "CRAWLDELAY_LIVE_VIEW": True,
}

PAGE_DEFAULTS: dict[str, Any] = {
    "RFC9309_PAGE_DIRECTIVES": True,
    "RFC9309_NOFOLLOW": True,
}

BACKOFF_DEFAULTS: dict[str, Any] = {
    "BACKOFF_ENABLED": True,
    "BACKOFF_HTTP_CODES": [429, 503],
    "BACKOFF_MAX_RETRY_AFTER": 3600,
    "BACKOFF_START": 10,
    "BACKOFF_MAX": 600,
    "BACKOFF_FORGIVE_AFTER": 1800,
    "BACKOFF_DELAY": 1.0,
}

FLEET_DEFAULTS: dict[str, Any] = {
    # The Redis a fleet of crawler processes shares spacing and robots.txt through.
    "FLEET_REDIS_URL": None,
}


def with_defaults(settings: BaseSettings, defaults: dict[str, Any]) -> BaseSettings:
    """A copy of *settings* where the plugin's defaults fill what is unset."""
    copy = settings.copy()
    copy.frozen = False  # a private copy: the crawler's settings stay untouched
    for name, value in defaults.items():
        if copy.get(name) is None:
            copy.set(name, value, priority="default")
    return copy


#: What ``-s FLEET_REDIS_URL=...`` may write for "no fleet".
FALSE_WORDS = frozenset({"false", "0", "", "none", "no", "off"})


def require_asyncio(what: str) -> None:
    """Stop the crawl at start-up unless it runs on asyncio (Scrapy's default asyncio
    reactor, or no reactor): *what* (a setting or component, and how to do without
    it) needs it."""
    if not is_asyncio_available():
        raise SettingError(
            f"{what} needs asyncio: Scrapy's default asyncio reactor (TWISTED_REACTOR = "
            '"twisted.internet.asyncioreactor.AsyncioSelectorReactor"), or '
            "TWISTED_REACTOR_ENABLED = False"
        )


def fleet_off(value: Any) -> bool:
    """Whether a ``FLEET_REDIS_URL`` value says "no fleet": ``False`` (or ``-s
    FLEET_REDIS_URL=False``), ``0``, empty."""
    return value is False or (isinstance(value, (str, int)) and str(value).lower() in FALSE_WORDS)


def scrapy_redis_url(settings: BaseSettings) -> str | None:
    """The Redis scrapy-redis's scheduler uses, as a URL, when ``SCHEDULER`` is
    scrapy-redis's: ``REDIS_URL``, else ``REDIS_HOST`` / ``REDIS_PORT`` /
    ``REDIS_DB`` and ``REDIS_PARAMS``, read as scrapy-redis reads them (the named
    settings win over ``REDIS_PARAMS``; ``localhost:6379`` by default), with the
    login, database and TLS options of ``REDIS_PARAMS`` that the URL does not name
    (redis-py takes those of the URL over its keyword arguments)."""
    if "scrapy_redis" not in str(settings.get("SCHEDULER") or ""):
        return None
    params = dict(settings.getdict("REDIS_PARAMS"))
    for name, param in (("REDIS_URL", "url"), ("REDIS_HOST", "host"), ("REDIS_PORT", "port")):
        if settings.get(name):
            params[param] = settings.get(name)
    if settings.get("REDIS_DB") not in (None, ""):
        params["db"] = settings.get("REDIS_DB")
    if params.get("url"):
        url = str(params["url"])
    else:
        scheme = "rediss" if params.get("ssl") else "redis"
        host = params.get("host") or "localhost"
        url = f"{scheme}://{host}:{params.get('port') or 6379}/{params.get('db') or 0}"
    # scrapy-redis hands REDIS_PARAMS to redis-py with the URL, whose own parts win:
    # the login, database and TLS options the URL does not name come from them.
    parts = urlsplit(url)
    user = quote(str(params.get("username") or ""), safe="")
    password = quote(str(params.get("password") or ""), safe="")
    if "@" not in parts.netloc and (user or password):
        login = f"{user}:{password}@" if password else f"{user}@"
        url = urlunsplit(parts._replace(netloc=login + parts.netloc))
    given = parse_qs(parts.query)
    options = {
        name: _query_value(value)
        for name, value in params.items()
        if name in TLS_OPTIONS
        and name not in given
        and (value is not None or name == "ssl_cert_reqs")
    }
    path_db = parts.scheme != "unix" and parts.path.strip("/")
    if params.get("db") not in (None, "") and "db" not in given and not path_db:
        options["db"] = str(params["db"])
    if options:
        url += ("&" if parts.query else "?") + urlencode(options)
    return url


def scrapy_redis_other_client(settings: BaseSettings) -> str | None:
    """The class named by scrapy-redis's ``REDIS_PARAMS['redis_cls']`` when it is not
    redis-py's client of one server (``redis.Redis`` or a subclass), a Redis Cluster
    client say; else None."""
    named = settings.getdict("REDIS_PARAMS").get("redis_cls")
    if named is None:
        return None
    try:
        import redis

        cls = load_object(named) if isinstance(named, str) else named
        if isinstance(cls, type) and issubclass(cls, redis.Redis):
            return None
    except (ImportError, ValueError, NameError, AttributeError):
        pass
    return named if isinstance(named, str) else f"{named.__module__}.{named.__qualname__}"


def _query_value(value: Any) -> str:
    """A redis-py keyword argument's value as a URL query option."""
    if value is None or value is ssl.CERT_NONE:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ssl.VerifyMode):
        return "optional" if value is ssl.CERT_OPTIONAL else "required"
    if isinstance(value, ssl.TLSVersion):
        return value.name
    return str(value)


def fleet_url(settings: BaseSettings) -> str | None:
    """``FLEET_REDIS_URL``, checked: a Redis URL the fleet client takes, and the asyncio
    reactor it runs on; ``None`` when unset or off (no fleet)."""
    url = settings.get("FLEET_REDIS_URL")
    if url is None or fleet_off(url):
        return None
    if not isinstance(url, str):
        raise SettingError(f"FLEET_REDIS_URL must be a Redis URL or False, not {url!r}")
    try:
        unusable = address_from_url(url) is None
    except ValueError as exc:
        raise _unusable_fleet_url(settings, url, str(exc)) from None
    if unusable:
        unknown = ", ".join(unknown_options(url))
        raise _unusable_fleet_url(
            settings,
            url,
            f"the fleet's client does not take its option(s) {unknown}"
            if unknown
            else "not a redis://, rediss:// or unix:// URL",
        )
    require_asyncio("FLEET_REDIS_URL")
    return str(url)


#: What a scrapy-redis project whose Redis the fleet cannot share may do instead.
FLEET_WAY_OUT = (
    "set FLEET_REDIS_URL to a single Redis server the fleet can use, or "
    "FLEET_REDIS_URL = False to keep politeness per process"
)


def _unusable_fleet_url(settings: BaseSettings, url: str, problem: str) -> SettingError:
    """The error for a fleet URL the fleet's client cannot use, naming the settings
    it came from: the user's ``FLEET_REDIS_URL``, or scrapy-redis's (the add-on's
    default)."""
    if settings.getpriority("FLEET_REDIS_URL") != SETTINGS_PRIORITIES["addon"]:
        return SettingError(f"FLEET_REDIS_URL {redacted_url(url)}: {problem}")
    return SettingError(
        f"scrapy-redis's Redis {redacted_url(url)} (REDIS_URL, REDIS_PARAMS), which the "
        f"add-on shares with the fleet: {problem}; {FLEET_WAY_OUT}"
    )


#: Every setting of the package (and Scrapy's robots.txt settings it reads).
KNOWN_SETTINGS = frozenset(
    {
        **ROBOTS_DEFAULTS,
        **BUDGET_DEFAULTS,
        **CRAWLDELAY_DEFAULTS,
        **BACKOFF_DEFAULTS,
        **PAGE_DEFAULTS,
        **FLEET_DEFAULTS,
    }
) | {"ROBOTSTXT_OBEY", "ROBOTSTXT_USER_AGENT", "ROBOTSTXT_PARSER"}
_PREFIXES = ("RFC9309_", "DOMAINBUDGET_", "CRAWLDELAY_", "BACKOFF_", "FLEET_")


#: Where a setting's value came from, by Scrapy's settings priority.
_SOURCES = {
    "default": "Scrapy's default",
    "command": "set by the scrapy command",
    "addon": "set by an add-on",
    "project": "set in the project's settings",
    "spider": "set in the spider's custom_settings",
    "cmdline": "set with -s on the command line",
}


def source(settings: BaseSettings, name: str) -> str:
    """Where the value of setting *name* came from, in words."""
    priority = settings.getpriority(name)
    for label, value in sorted(SETTINGS_PRIORITIES.items(), key=lambda item: -item[1]):
        if priority is not None and priority >= value:
            return _SOURCES.get(label, f"set at priority {priority}")
    return _SOURCES["default"]


def deliberate(settings: BaseSettings, name: str) -> bool:
    """True when *name* was set for one spider or one run (its ``custom_settings`` or
    ``-s``): an opt-out there is a choice, not an oversight."""
    priority = settings.getpriority(name)
    return priority is not None and priority >= SETTINGS_PRIORITIES["spider"]


def configured_token(settings: BaseSettings) -> str:
    """The product token robots.txt groups are matched against: that of
    ``ROBOTSTXT_USER_AGENT``, else of ``USER_AGENT`` (RFC 9309 §2.2.1)."""
    return product_token(
        str(settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "")
    )


def token_mistakes(settings: BaseSettings) -> list[str]:
    """What is wrong with the product token robots.txt groups are matched against:
    ``ROBOTSTXT_USER_AGENT``, else the product name ``USER_AGENT`` starts with."""
    configured = settings.get("ROBOTSTXT_USER_AGENT")
    user_agent = str(settings.get("USER_AGENT") or "")
    if not configured and user_agent.lower().startswith("mozilla/"):
        return [
            "USER_AGENT starts with 'Mozilla/', so the product token robots.txt groups are "
            "matched against is 'mozilla' and a site's group for your crawler is never "
            "used; set ROBOTSTXT_USER_AGENT to your crawler's name (e.g. "
            "ROBOTSTXT_USER_AGENT = 'MyBot')"
        ]
    token = configured_token(settings)
    if not is_rfc_token(token):
        name = "ROBOTSTXT_USER_AGENT" if configured else "USER_AGENT"
        return [
            f"the crawler's product token {token!r} (from {name}) is not a product token "
            f"RFC 9309 §2.2.1 allows (letters, '_' and '-' only): sites following the RFC "
            f"cannot write a group for it; set ROBOTSTXT_USER_AGENT to such a name "
            f"(e.g. ROBOTSTXT_USER_AGENT = 'MyBot')"
        ]
    return []


def mistakes(settings: BaseSettings) -> list[str]:
    """What in *settings* silently does nothing, each said with how to fix it:
    robots.txt not obeyed, a budget policy without budgets, and names with this
    package's prefixes that it does not know (with the closest known one)."""
    found = []
    if not flag(settings, "ROBOTSTXT_OBEY") and not deliberate(settings, "ROBOTSTXT_OBEY"):
        found.append(
            f"ROBOTSTXT_OBEY is False ({source(settings, 'ROBOTSTXT_OBEY')}): robots.txt is "
            "not fetched, nothing is disallowed and no Crawl-delay applies; set "
            "ROBOTSTXT_OBEY = True"
        )
    policy = settings.get("DOMAINBUDGET_POLICY") or settings.get("DOMAINBUDGET_POLICY_FILE")
    if policy and not flag(settings, "DOMAINBUDGET_ENABLED"):
        found.append(
            "a budget policy is set but DOMAINBUDGET_ENABLED is not: no request is counted "
            "or dropped; set DOMAINBUDGET_ENABLED = True"
        )
    backoff = (settings.getpriority("BACKOFF_ENABLED") or 0) > SETTINGS_PRIORITIES["addon"]
    if backoff and flag(settings, "BACKOFF_ENABLED") and not flag(settings, "CRAWLDELAY_ENABLED"):
        found.append(
            "BACKOFF_ENABLED is True but CRAWLDELAY_ENABLED is not: backing off is part of "
            "the Crawl-delay throttle, so no host is held on 429/503; set "
            "CRAWLDELAY_ENABLED = True"
        )
    if scrapy_redis_url(settings) is not None and settings.get("FLEET_REDIS_URL") is None:
        found.append(
            "SCHEDULER is scrapy-redis's but FLEET_REDIS_URL is not set: each process is "
            "polite alone (Crawl-delay spacing, backoff holds and robots.txt are not shared, "
            "so N processes may send N times the Crawl-delay's rate); set FLEET_REDIS_URL to "
            "the fleet's Redis (the add-on sets it to scrapy-redis's own)"
        )
    for name in sorted(settings.attributes):
        if name.startswith(_PREFIXES) and name not in KNOWN_SETTINGS:
            import difflib  # only for a misspelt name

            close = difflib.get_close_matches(name, KNOWN_SETTINGS, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "see the README's settings tables"
            found.append(f"{name} is not a setting of scrapy_rfc9309 and does nothing: {hint}")
    return found
