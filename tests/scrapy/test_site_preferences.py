"""What sites say beyond allow/disallow, in real crawls: Content-Usage and
Content-Signal preferences (on meta; enforced only when asked), and page-level
``nofollow`` (X-Robots-Tag and <meta name="robots">)."""

from __future__ import annotations

import pytest_twisted
import scrapy

from tests.crawl import ListSpider, crawl

ADDON = {"ADDONS": {"scrapy_rfc9309.Addon": 500}, "DOWNLOADER_MIDDLEWARES": {}}
ROBOTS = b"""User-agent: *
Disallow: /private/
Content-Usage: /articles/ train-ai=n
Content-Signal: search=yes, ai-train=no
"""


class MetaSpider(ListSpider):
    """Records each response's preferences and page directives."""

    name = "meta"

    def parse(self, response):
        self.seen.append(
            (
                response.url.split("/", 3)[3],
                response.meta.get("rfc9309_preferences"),
                response.meta.get("rfc9309_page_directives"),
            )
        )


def article_urls(site):
    return [f"{site.url}/articles/{n}" for n in range(3)] + [f"{site.url}/about"]


@pytest_twisted.ensureDeferred
async def test_with_enforcement_no_refused_page_reaches_the_server(site):
    site.route("/robots.txt", body=ROBOTS)
    crawler = await crawl(
        article_urls(site), spider=MetaSpider, RFC9309_CONTENT_USES=["train-ai"], **ADDON
    )
    assert site.paths() == ["/robots.txt"]
    # /about too: its Content-Signal says ai-train=no, the same use as train-ai.
    assert crawler.spider.seen == []
    assert crawler.stats.get_value("rfc9309/preference_refused") == 4
    report = crawler.stats.get_value("rfc9309/report")
    assert report[0]["rules"] == [
        {"rule": "Content-Usage: /articles/ train-ai=n", "line": 3, "dropped": 3},
        {"rule": "Content-Signal: search=yes, ai-train=no", "line": 4, "dropped": 1},
    ]


@pytest_twisted.ensureDeferred
async def test_a_use_named_in_one_vocabulary_is_refused_by_the_other(site):
    site.route(
        "/robots.txt", body=b"User-agent: *\nContent-Signal: /articles/ search=yes, ai-train=no\n"
    )
    crawler = await crawl(
        article_urls(site), spider=MetaSpider, RFC9309_CONTENT_USES=["train-ai"], **ADDON
    )
    assert not any(path.startswith("/articles/") for path in site.paths())
    assert crawler.stats.get_value("rfc9309/preference_refused") == 3


@pytest_twisted.ensureDeferred
async def test_without_enforcement_the_pages_come_with_their_preferences(site):
    site.route("/robots.txt", body=ROBOTS)
    site.route("/about", body=b"<html></html>", headers={"Content-Usage": "train-ai=y, search=n"})
    crawler = await crawl(article_urls(site), spider=MetaSpider, **ADDON)
    seen = {path: preferences for path, preferences, _ in crawler.spider.seen}
    assert sum(path.startswith("/articles/") for path in site.paths()) == 3
    assert seen["articles/0"] == {
        "content-usage": {"train-ai": "n"},
        "content-signal": {"search": "yes", "ai-train": "no"},
        "lines": [
            "line 3: Content-Usage: /articles/ train-ai=n",
            "line 4: Content-Signal: search=yes, ai-train=no",
        ],
    }
    # The response's own header wins for that response.
    assert seen["about"]["content-usage"] == {"train-ai": "y", "search": "n"}
    assert seen["about"]["lines"][-1] == "Content-Usage header: train-ai=y, search=n"


@pytest_twisted.ensureDeferred
async def test_a_response_whose_header_refuses_a_use_does_not_reach_the_spider(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.route("/p", body=b"<html></html>", headers={"Content-Usage": "train-ai=n"})
    crawler = await crawl(
        [f"{site.url}/p", f"{site.url}/q"],
        spider=MetaSpider,
        RFC9309_CONTENT_USES=["train-ai"],
        **ADDON,
    )
    assert [seen[0] for seen in crawler.spider.seen] == ["q"]
    assert crawler.stats.get_value("rfc9309/preference_refused_response") == 1


class LinkSpider(ListSpider):
    """Follows every link of the pages it is given (one level)."""

    name = "links"

    def parse(self, response):
        self.seen.append(response.url)
        if response.meta.get("depth", 0) == 0:
            yield from response.follow_all(css="a")


def page_with_links(site, path, links, head=b""):
    body = b"<html><head>" + head + b"</head><body>"
    body += b"".join(b'<a href="%s">x</a>' % link.encode() for link in links)
    return body + b"</body></html>"


@pytest_twisted.ensureDeferred
async def test_nofollow_pages_have_none_of_their_links_followed(site, caplog):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.route(
        "/by-header",
        body=page_with_links(site, "/by-header", ["/h1", "/h2"]),
        headers={"Content-Type": "text/html", "X-Robots-Tag": "nofollow"},
    )
    site.route(
        "/by-meta",
        body=page_with_links(
            site, "/by-meta", ["/m1"], b'<meta name="robots" content="noindex, nofollow">'
        ),
        headers={"Content-Type": "text/html"},
    )
    site.route(
        "/for-another-bot",
        body=page_with_links(site, "/x", ["/o1"]),
        headers={"Content-Type": "text/html", "X-Robots-Tag": "otherbot: nofollow"},
    )
    site.route(
        "/followed",
        body=page_with_links(site, "/followed", ["/f1"], b'<meta name="TestBot" content="noai">'),
        headers={"Content-Type": "text/html"},
    )
    site.route(  # the crawler's own name, content first
        "/for-this-bot",
        body=page_with_links(site, "/t", ["/t1"], b"<meta content=nofollow NAME = 'testbot'>"),
        headers={"Content-Type": "text/html"},
    )
    paths = ("by-header", "by-meta", "for-another-bot", "followed", "for-this-bot")
    urls = [f"{site.url}/{path}" for path in paths]
    caplog.set_level("INFO", logger="scrapy_rfc9309")
    crawler = await crawl(urls, spider=LinkSpider, **ADDON)
    requested = set(site.paths())
    assert not {"/h1", "/h2", "/m1", "/t1"} & requested
    assert {"/o1", "/f1"} <= requested
    assert crawler.stats.get_value("rfc9309/nofollow_dropped") == 4
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nofollow: ")]
    assert said == [
        "nofollow: 4 links not followed, on pages that said nofollow "
        "(RFC9309_NOFOLLOW = False follows them)"
    ]


@pytest_twisted.ensureDeferred
async def test_nofollow_counts_a_link_to_a_file_as_a_link(site):
    """A link to a PDF or an image is a link, whatever its extension (Scrapy's link
    extractor leaves such links out by default)."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    links = ["/guide.pdf", "/photo.jpg", "/next"]
    head = b'<meta name="robots" content="nofollow">'
    site.route(
        "/p", body=page_with_links(site, "/p", links, head), headers={"Content-Type": "text/html"}
    )
    crawler = await crawl([f"{site.url}/p"], spider=LinkSpider, **ADDON)
    assert not set(links) & set(site.paths())
    assert crawler.stats.get_value("rfc9309/nofollow_dropped") == 3


class BuildingSpider(ListSpider):
    """Follows a login page's links, and builds requests of its own: the login form's
    submission, a link asked for with ``dont_obey_robotstxt``, an API's next page."""

    name = "building"

    def parse(self, response):
        self.seen.append(response.url)
        if response.meta.get("depth", 0):
            return
        if response.url.endswith("/login"):
            yield from response.follow_all(css="a")
            action = response.css("form::attr(action)").get()
            yield scrapy.FormRequest(response.urljoin(action), method="GET", formdata={"user": "u"})
            yield response.follow("/l2#top", meta={"dont_obey_robotstxt": True})
        else:
            yield response.follow(response.json()["next"])


@pytest_twisted.ensureDeferred
async def test_nofollow_drops_the_pages_links_not_the_requests_a_spider_builds(site):
    """A login page (``noindex, nofollow`` in its head, as many are) and an API whose
    JSON says ``X-Robots-Tag: noindex, nofollow`` (as many do): the page's links are
    not followed, its form is submitted and the API's next page is fetched."""
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    form = b'<form action="/session" method="get"><input name="user"></form>'
    site.route(
        "/login",
        body=page_with_links(
            site,
            "/login",
            ["/l1", "l2#top"],
            b'<meta name="robots" content="noindex, nofollow">',
        ).replace(b"</body>", form + b"</body>"),
        headers={"Content-Type": "text/html"},
    )
    site.route(
        "/api/1",
        body=b'{"next": "/api/2"}',
        headers={"Content-Type": "application/json", "X-Robots-Tag": "noindex, nofollow"},
    )
    crawler = await crawl(
        [f"{site.url}/login", f"{site.url}/api/1"], spider=BuildingSpider, **ADDON
    )
    requested = set(site.paths())
    assert "/l1" not in requested
    assert {"/session?user=u", "/l2", "/api/2"} <= requested
    assert crawler.stats.get_value("rfc9309/nofollow_dropped") == 2  # /l1, /l2 without the key


@pytest_twisted.ensureDeferred
async def test_directives_are_put_on_meta_and_nofollow_can_be_turned_off(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    site.route(
        "/p",
        body=page_with_links(site, "/p", ["/l"], b'<meta name="robots" content="none, noai">'),
        headers={"Content-Type": "text/html"},
    )
    crawler = await crawl([f"{site.url}/p"], spider=MetaSpider, RFC9309_NOFOLLOW=False, **ADDON)
    assert crawler.spider.seen[0][2] == ["noai", "nofollow", "noindex", "none"]
    crawler = await crawl([f"{site.url}/p"], spider=LinkSpider, RFC9309_NOFOLLOW=False, **ADDON)
    assert "/l" in site.paths()


@pytest_twisted.ensureDeferred
async def test_meta_tags_count_in_the_head_only_whatever_the_pages_length(site):
    site.route("/robots.txt", body=b"User-agent: *\nAllow: /\n")
    html = {"Content-Type": "text/html"}
    # An old page's capitals, and a long body full of name= attributes after the head.
    inputs = b'<input name="robotsfield">' * 20_000
    shouting = b'<HTML><HEAD><META NAME="ROBOTS" CONTENT="NOFOLLOW"></HEAD><BODY>'
    site.route("/shouting", body=shouting + b'<a href="/s1">x</a>' + inputs, headers=html)
    in_body = b'<html><head></head><body><meta name="robots" content="nofollow">'
    site.route("/in-body", body=in_body + b'<a href="/b1">x</a>', headers=html)
    bare = b'<meta name=robots content=nofollow><a href="/n1">x</a>'  # no head or body tag
    site.route("/bare", body=bare, headers=html)
    urls = [f"{site.url}/{path}" for path in ("shouting", "in-body", "bare")]
    await crawl(urls, spider=LinkSpider, **ADDON)
    requested = set(site.paths())
    assert not {"/s1", "/n1"} & requested
    assert "/b1" in requested  # a meta tag in the body is not the page's
