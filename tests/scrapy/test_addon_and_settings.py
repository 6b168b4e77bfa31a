"""The add-on and start-up validation of settings."""

import pytest
import pytest_twisted
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as Builtin
from scrapy.settings import Settings
from scrapy.utils.misc import load_object

from scrapy_rfc9309 import Addon, RobotsTxtMiddleware
from scrapy_rfc9309._settings import SettingError
from tests.crawl import crawl


def addon_settings(setting="DOWNLOADER_MIDDLEWARES", **user):
    """The enabled components of *setting* and their orders, as Scrapy resolves them."""
    settings = Settings(user)
    Addon().update_settings(settings)
    return enabled_components(settings, setting)


def enabled_components(settings, setting):
    components = settings.getwithbase(setting)
    resolved = {}  # keys are classes or import paths: the last one set for a class wins
    for key, order in sorted(components.items(), key=lambda item: components.getpriority(item[0])):
        resolved[load_object(key) if isinstance(key, str) else key] = order
    return {cls: order for cls, order in resolved.items() if order is not None}


def order_of(components, cls):
    return components.get(cls)


def test_addon_replaces_the_builtin_middleware():
    components = addon_settings()
    assert Builtin not in components
    assert order_of(components, RobotsTxtMiddleware) == 100


def test_addon_places_the_budget_middleware_after_the_http_cache():
    from scrapy.downloadermiddlewares.httpcache import HttpCacheMiddleware

    from scrapy_rfc9309 import DomainBudgetMiddleware

    components = addon_settings()
    assert order_of(components, DomainBudgetMiddleware) > order_of(components, HttpCacheMiddleware)


def test_addon_keeps_an_order_the_user_set():
    components = addon_settings(DOWNLOADER_MIDDLEWARES={"scrapy_rfc9309.RobotsTxtMiddleware": 123})
    assert order_of(components, RobotsTxtMiddleware) == 123


@pytest_twisted.ensureDeferred
async def test_addon_crawl_fetches_robots_txt_once(site):
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n")
    await crawl(
        [site.url + "/a", site.url + "/private"],
        DOWNLOADER_MIDDLEWARES={},
        ADDONS={"scrapy_rfc9309.Addon": 500},
    )
    assert sorted(site.paths()) == ["/a", "/robots.txt"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RFC9309_CACHE_TTL", 86401),
        ("RFC9309_CACHE_TTL", "soon"),
        ("RFC9309_FAILURE_TTL", -1),
        ("RFC9309_UNREACHABLE", "maybe"),
        ("RFC9309_TIMEOUT", 0),
        ("RFC9309_MAX_BYTES", 1000),
        ("RFC9309_MAX_REDIRECTS", -1),
        ("RFC9309_CACHE_SIZE", 0),
        ("RFC9309_EXCLUDE_PATHS", ["re:("]),
        # Not finite, or not of the setting's kind: named, never a raw error.
        ("RFC9309_TIMEOUT", float("nan")),
        ("RFC9309_TIMEOUT", "nan"),
        ("RFC9309_CACHE_TTL", float("inf")),
        ("RFC9309_FAILURE_TTL", "inf"),
        ("RFC9309_MAX_BYTES", 1e300),
        ("RFC9309_CACHE_SIZE", float("nan")),
        ("RFC9309_LENIENT", "maybe"),
        ("RFC9309_EXCLUDE_PATHS", 5),
        ("FLEET_REDIS_URL", "http://not-redis"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_a_bad_setting_stops_the_crawl_at_start_up_naming_it(site, name, value):
    with pytest.raises(SettingError, match=name):
        await crawl([site.url + "/a"], **{name: value})
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_robots_obey_false_disables_the_middleware(site):
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /\n")
    await crawl([site.url + "/a"], ROBOTSTXT_OBEY=False)
    assert site.paths() == ["/a"]


def test_addon_enables_the_crawl_delay_throttle_unless_the_user_turned_it_off():
    from scrapy_rfc9309 import CrawlDelayThrottle

    for user, enabled in (({}, True), ({"CRAWLDELAY_ENABLED": False}, False)):
        settings = Settings(user)
        Addon().update_settings(settings)
        assert CrawlDelayThrottle in enabled_components(settings, "EXTENSIONS")
        assert settings.getbool("CRAWLDELAY_ENABLED") is enabled


@pytest.mark.parametrize(
    ("queue", "said"),
    [
        (None, False),
        ("scrapy_rfc9309.pqueues.HostReadyPriorityQueue", False),
        ("scrapy.pqueues.DownloaderAwarePriorityQueue", True),
        ("scrapy.pqueues.ScrapyPriorityQueue", True),
    ],
)
def test_the_addon_says_what_a_projects_own_priority_queue_costs(caplog, queue, said):
    """Scrapy's queues hand out pages whose unit is not ready: they wait in the
    downloader, taking places of CONCURRENT_REQUESTS (docs/throttle.md); the
    add-on keeps the project's choice, and says so at INFO."""
    settings = Settings({"SCHEDULER_PRIORITY_QUEUE": queue} if queue else {})
    with caplog.at_level("INFO", logger="scrapy_rfc9309.addon"):
        Addon().update_settings(settings)
    kept = [record for record in caplog.records if "is kept" in record.getMessage()]
    assert settings["SCHEDULER_PRIORITY_QUEUE"] == (
        queue or "scrapy_rfc9309.pqueues.HostReadyPriorityQueue"
    )
    assert bool(kept) is said
    if said:
        assert kept[0].levelname == "INFO"
        assert queue in kept[0].getMessage() and "CONCURRENT_REQUESTS" in kept[0].getMessage()


@pytest_twisted.ensureDeferred
async def test_a_bad_crawl_delay_cap_stops_the_crawl_at_start_up_naming_it(site):
    with pytest.raises(SettingError, match="CRAWLDELAY_MAX_DELAY"):
        await crawl(
            [site.url + "/a"],
            CRAWLDELAY_ENABLED=True,
            CRAWLDELAY_MAX_DELAY=-1,
            EXTENSIONS={"scrapy_rfc9309.CrawlDelayThrottle": 500},
        )
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_a_storage_that_does_not_load_is_named(site):
    with pytest.raises(
        SettingError, match=r"DOMAINBUDGET_STORAGE: cannot load 'no\.such\.Storage'"
    ):
        await crawl(
            [site.url + "/a"],
            DOMAINBUDGET_ENABLED=True,
            DOMAINBUDGET_STORAGE="no.such.Storage",
            DOWNLOADER_MIDDLEWARES={"scrapy_rfc9309.DomainBudgetMiddleware": 950},
        )
    assert site.paths() == []


@pytest.mark.parametrize(
    "decompression, message",
    [
        (None, "RobotsTxtDecompressionMiddleware must be enabled"),
        (580, "needs a higher order than HttpCompressionMiddleware"),  # before 590
    ],
)
@pytest_twisted.ensureDeferred
async def test_robots_bodies_are_never_decoded_whole_or_the_crawl_does_not_start(
    site, decompression, message
):
    middlewares = {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_rfc9309.RobotsTxtMiddleware": 100,
        "scrapy_rfc9309.RobotsTxtDecompressionMiddleware": decompression,
    }
    with pytest.raises(SettingError, match=f"DOWNLOADER_MIDDLEWARES: .*{message}"):
        await crawl([site.url + "/a"], DOWNLOADER_MIDDLEWARES=middlewares)
    assert site.paths() == []


@pytest.mark.parametrize(
    ("values", "url"),
    [
        ({"REDIS_URL": "redis://r:6380/2"}, "redis://r:6380/2"),
        ({}, "redis://localhost:6379/0"),
        ({"REDIS_HOST": "r", "REDIS_PORT": 7000, "REDIS_DB": 3}, "redis://r:7000/3"),
        (
            {"REDIS_PARAMS": {"host": "r", "password": "p@ss", "ssl": True, "db": 1}},
            "rediss://:p%40ss@r:6379/1",
        ),
        (
            {"REDIS_PARAMS": {"url": "unix:///tmp/r.sock"}, "REDIS_HOST": "ignored"},
            "unix:///tmp/r.sock",
        ),
        # scrapy-redis gives REDIS_PARAMS to redis-py with the URL: its TLS options
        # too, those the URL names excepted (redis-py takes the URL's).
        (
            {"REDIS_HOST": "r", "REDIS_PARAMS": {"ssl": True, "ssl_cert_reqs": None}},
            "rediss://r:6379/0?ssl_cert_reqs=none",
        ),
        (
            {
                "REDIS_URL": "rediss://r/1?ssl_cert_reqs=required",
                "REDIS_PARAMS": {
                    "ssl_ca_certs": "/ca.pem",
                    "ssl_check_hostname": False,
                    "ssl_cert_reqs": None,
                },
            },
            "rediss://r/1?ssl_cert_reqs=required&ssl_ca_certs=%2Fca.pem&ssl_check_hostname=false",
        ),
    ],
)
def test_the_fleet_redis_is_scrapy_redis_own_as_scrapy_redis_reads_its_settings(values, url):
    from scrapy_rfc9309._settings import scrapy_redis_url

    settings = Settings({"SCHEDULER": "scrapy_redis.scheduler.Scheduler", **values})
    assert scrapy_redis_url(settings) == url
    assert scrapy_redis_url(Settings(values)) is None  # not scrapy-redis's scheduler


@pytest.mark.parametrize(
    "values",
    [
        # A password kept out of the URL, the database set apart: as many projects do.
        {"REDIS_URL": "redis://r:6380", "REDIS_PARAMS": {"password": "p@ss", "username": "u"}},
        {"REDIS_URL": "redis://r:6380", "REDIS_PARAMS": {"password": "p"}, "REDIS_DB": 3},
        # The URL's own login and database win.
        {"REDIS_URL": "redis://:own@r/1", "REDIS_PARAMS": {"password": "other"}, "REDIS_DB": 3},
        {"REDIS_HOST": "r", "REDIS_PORT": 7000, "REDIS_PARAMS": {"password": "p", "db": 2}},
        {"REDIS_URL": "unix:///tmp/r.sock", "REDIS_PARAMS": {"password": "p"}, "REDIS_DB": 4},
    ],
)
@pytest.mark.filterwarnings("ignore:.*retry_on_timeout:DeprecationWarning")  # scrapy-redis's
def test_the_fleet_logs_in_to_the_redis_and_database_scrapy_redis_uses(values):
    """scrapy-redis's own client (``get_redis_from_settings``) and the fleet's, from
    the same settings: one server, one login, one database."""
    from scrapy_redis.connection import get_redis_from_settings

    from scrapy_rfc9309._redis import address_from_url
    from scrapy_rfc9309._settings import scrapy_redis_url

    settings = Settings({"SCHEDULER": "scrapy_redis.scheduler.Scheduler", **values})
    theirs = get_redis_from_settings(settings).connection_pool.connection_kwargs
    ours = address_from_url(scrapy_redis_url(settings))
    where = (ours.path,) if ours.path else (ours.host, ours.port)
    # redis-py's defaults where neither the URL nor the parameters say.
    their_where = (
        (theirs["path"],) if "path" in theirs else (theirs["host"], theirs.get("port", 6379))
    )
    assert (*where, ours.db, ours.username, ours.password) == (
        *their_where,
        int(theirs.get("db", 0)),
        theirs.get("username"),
        theirs.get("password"),
    )


def test_the_addon_shares_politeness_through_scrapy_redis_unless_told_not_to():
    from scrapy.utils.test import get_crawler

    scrapy_redis = {"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "REDIS_URL": "redis://r/1"}
    settings = get_crawler(
        settings_dict={"ADDONS": {"scrapy_rfc9309.Addon": 500}, **scrapy_redis}
    ).settings
    assert settings["FLEET_REDIS_URL"] == "redis://r/1"
    assert settings["SCHEDULER_QUEUE_CLASS"] == "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"
    own_queue = {**scrapy_redis, "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue"}
    settings = get_crawler(
        settings_dict={"ADDONS": {"scrapy_rfc9309.Addon": 500}, **own_queue}
    ).settings
    assert settings["SCHEDULER_QUEUE_CLASS"] == "scrapy_redis.queue.FifoQueue"
    settings = get_crawler(
        settings_dict={
            "ADDONS": {"scrapy_rfc9309.Addon": 500},
            "FLEET_REDIS_URL": False,
            **scrapy_redis,
        }
    ).settings
    assert settings["FLEET_REDIS_URL"] is False
    assert settings.get("SCHEDULER_QUEUE_CLASS") is None
    from scrapy_rfc9309._settings import fleet_url

    for off in (False, "False", "0", ""):  # -s FLEET_REDIS_URL=False gives a string
        assert fleet_url(Settings({"FLEET_REDIS_URL": off})) is None


@pytest.mark.parametrize(
    ("redis_url", "message"),
    [
        ("rediss://u:secret@r/1?readonly=true", "does not take its option\\(s\\) readonly"),
        ("rediss://u:secret@r/1?ssl_cert_reqs=sometimes", "ssl_cert_reqs must be one of"),
    ],
)
def test_a_scrapy_redis_url_the_fleet_cannot_use_is_named_as_scrapy_redis_s(redis_url, message):
    """The add-on shares scrapy-redis's Redis with the fleet: a URL the fleet's
    client cannot use stops the crawl naming scrapy-redis's settings and the way
    out, not a FLEET_REDIS_URL the user never set, and without the password."""
    from scrapy.utils.test import get_crawler

    scrapy_redis = {"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "REDIS_URL": redis_url}
    with pytest.raises(SettingError, match=message) as raised:
        get_crawler(settings_dict={"ADDONS": {"scrapy_rfc9309.Addon": 500}, **scrapy_redis})
    said = str(raised.value)
    assert "scrapy-redis's Redis rediss://r/1 (REDIS_URL, REDIS_PARAMS)" in said
    assert "FLEET_REDIS_URL = False" in said and "secret" not in said


def test_a_scrapy_redis_cluster_client_is_named_and_the_fleet_left_to_the_user():
    """scrapy-redis may use a Redis Cluster client (``REDIS_PARAMS['redis_cls']``);
    the fleet's scripts and the shared queue's run on one server: the add-on says so
    at start-up rather than share politeness through a cluster node, and with
    ``FLEET_REDIS_URL`` named keeps scrapy-redis's queue."""
    from scrapy.utils.test import get_crawler

    cluster = {
        "ADDONS": {"scrapy_rfc9309.Addon": 500},
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "REDIS_PARAMS": {"redis_cls": "redis.cluster.RedisCluster"},
    }
    with pytest.raises(SettingError, match=r"redis_cls'\] is redis.cluster.RedisCluster.*"):
        get_crawler(settings_dict=cluster)
    settings = get_crawler(settings_dict={**cluster, "FLEET_REDIS_URL": "redis://one/0"}).settings
    assert settings["FLEET_REDIS_URL"] == "redis://one/0"
    assert settings.get("SCHEDULER_QUEUE_CLASS") is None  # scrapy-redis's own
    # redis-py's client of one server, named or a subclass, is the usual case.
    plain = {**cluster, "REDIS_PARAMS": {"redis_cls": "redis.StrictRedis"}}
    settings = get_crawler(settings_dict=plain).settings
    assert settings["SCHEDULER_QUEUE_CLASS"] == "scrapy_rfc9309.redisqueue.HostReadyRedisQueue"
    # Named by hand with a client of another kind, the queue says why it cannot run.
    from redis.cluster import RedisCluster
    from scrapy import Spider

    from scrapy_rfc9309.redisqueue import HostReadyRedisQueue

    crawler = get_crawler()
    spider = Spider.from_crawler(crawler, "queue")
    with pytest.raises(SettingError, match=r"one Redis server.*redis\.cluster\.RedisCluster"):
        HostReadyRedisQueue(RedisCluster.__new__(RedisCluster), spider, "queue")
