"""RFC 9309 §2.1 and §2.2.1: groups and user-agent matching."""

import pytest

from scrapy_rfc9309 import RobotsTxt, product_token
from scrapy_rfc9309.robots import Rule


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("MyBot/1.0 (+http://x)", "mybot"),
        ("MyBot", "mybot"),
        ("my_bot-2", "my_bot-2"),
        ("AI2Bot-Dolma/1.0", "ai2bot-dolma"),
        ("Mozilla/5.0 (compatible; ExampleBot/0.1)", "mozilla"),
        ("  FooBot", "foobot"),
        ("360Spider", "360spider"),
        ("", ""),
    ],
)
def test_rfc_2_2_1_product_token_of_a_user_agent_string(user_agent, token):
    assert product_token(user_agent) == token


def test_rfc_2_2_1_user_agent_matching_is_case_insensitive():
    robots = RobotsTxt.parse("User-agent: FooBot\nDisallow: /\n")
    assert not robots.allowed("/x", "foobot")
    assert not robots.allowed("/x", "FOOBOT/2.0")


def test_rfc_2_2_1_whole_token_only():
    robots = RobotsTxt.parse("User-agent: Foo\nDisallow: /\n")
    assert robots.allowed("/x", "FooBot")
    robots = RobotsTxt.parse("User-agent: FooBot\nDisallow: /\n")
    assert robots.allowed("/x", "Foo")


@pytest.mark.parametrize(
    ("first", "second"), [("Bot1", "Bot2"), ("Bot2", "Bot1"), ("MJ12bot", "MJ13bot")]
)
def test_rfc_2_2_1_names_with_digits_are_never_merged(first, second):
    # Cutting names at the first character outside [A-Za-z_-] would make both "Bot".
    robots = RobotsTxt.parse(
        f"User-agent: {first}\nDisallow: /private\n\nUser-agent: {second}\nAllow: /\n"
    )
    assert robots.allowed("https://example.com/private", second)
    assert not robots.allowed("https://example.com/private", first)
    assert robots.allowed("https://example.com/private", "Bot"), "no group names Bot"


@pytest.mark.parametrize(
    ("blocked", "allowed"), [("AI2Bot", "AI2Bot-Dolma"), ("AI2Bot-Dolma", "AI2Bot")]
)
def test_rfc_2_2_1_a_longer_name_is_another_crawler(blocked, allowed):
    robots = RobotsTxt.parse(
        f"User-agent: {blocked}\nDisallow: /\n\nUser-agent: {allowed}\nAllow: /\n"
    )
    assert not robots.allowed("https://example.com/page", blocked)
    assert robots.allowed("https://example.com/page", allowed)
    assert robots.allowed("https://example.com/page", f"{allowed}/2.1 (+https://x)")


def test_rfc_2_2_1_version_in_the_file_is_not_part_of_the_token():
    robots = RobotsTxt.parse("User-agent: FooBot/1.0\nDisallow: /\n")
    assert not robots.allowed("/x", "FooBot")


@pytest.mark.parametrize("written", ["barbarbot*", "barbarbot/2.0", "barbarbot (+http://x)"])
def test_beyond_rfc_a_name_on_the_files_line_ends_at_a_trailing_star_or_version(written):
    # Google's parser, Protego and robotspy read "barbarbot" from each of these.
    robots = RobotsTxt.parse(
        f"User-agent: {written}\nDisallow: /workers/\n\nUser-agent: *\nDisallow: /\n"
    )
    assert robots.allowed("https://example.com/foo/bar", "barbarbot")
    assert not robots.allowed("https://example.com/workers/x", "barbarbot")
    assert not robots.allowed("https://example.com/foo/bar", "otherbot")  # the * group


def test_beyond_rfc_a_starred_name_alone_is_the_crawlers_group_not_everyones():
    robots = RobotsTxt.parse("User-agent: mybot*\nDisallow: /\n")
    assert not robots.allowed("https://example.com/a", "mybot")
    assert robots.allowed("https://example.com/a", "otherbot")  # no * group: allowed
    # The mirror images: a name that only starts like it stays another crawler.
    assert robots.allowed("https://example.com/a", "mybotx")
    robots = RobotsTxt.parse("User-agent: mybotx*\nDisallow: /\n")
    assert robots.allowed("https://example.com/a", "mybot")


def test_rfc_2_2_1_groups_naming_the_crawler_are_merged():
    robots = RobotsTxt.parse(
        "User-agent: foobot\nDisallow: /a\n\nUser-agent: *\nDisallow: /c\n\n"
        "User-agent: FooBot\nDisallow: /b\n"
    )
    assert not robots.allowed("/a", "foobot")
    assert not robots.allowed("/b", "foobot")
    assert robots.allowed("/c", "foobot"), "the * group must not apply to a named crawler"


def test_rfc_2_2_1_star_groups_apply_only_when_no_group_names_the_crawler():
    robots = RobotsTxt.parse(
        "User-agent: *\nDisallow: /a\n\nUser-agent: other\nDisallow: /\n\n"
        "User-agent: *\nDisallow: /b\n"
    )
    assert not robots.allowed("/a", "mybot")
    assert not robots.allowed("/b", "mybot"), "all * groups are merged"
    assert robots.allowed("/c", "mybot")
    assert robots.select("mybot").is_star


def test_rfc_2_2_1_no_matching_group_and_no_star_means_no_rules():
    robots = RobotsTxt.parse("User-agent: other\nDisallow: /\n")
    assert robots.allowed("/x", "mybot")
    assert robots.select("mybot").groups == ()


def test_rfc_2_1_consecutive_user_agent_lines_share_one_group():
    robots = RobotsTxt.parse("User-agent: a\nUser-agent: b\nDisallow: /x\n")
    assert not robots.allowed("/x", "a")
    assert not robots.allowed("/x", "b")


def test_rfc_2_1_a_user_agent_line_after_rules_starts_a_new_group():
    robots = RobotsTxt.parse("User-agent: a\nDisallow: /x\nUser-agent: b\nDisallow: /y\n")
    assert robots.allowed("/y", "a")
    assert robots.allowed("/x", "b")


@pytest.mark.parametrize(
    "between",
    ["", "\n", "# comment\n", "Sitemap: https://e.com/s.xml\n", "Crawl-delay: 5\n", "Foo: bar\n"],
)
def test_rfc_2_1_other_records_blank_lines_and_comments_do_not_end_a_group(between):
    robots = RobotsTxt.parse(f"User-agent: a\n{between}User-agent: b\nDisallow: /x\n")
    assert not robots.allowed("/x", "a")
    assert not robots.allowed("/x", "b")


def test_rfc_2_1_blank_lines_inside_a_group_do_not_end_it():
    robots = RobotsTxt.parse("User-agent: a\n\nDisallow: /x\n\n\nDisallow: /y\n")
    assert not robots.allowed("/y", "a")


def test_rfc_2_2_2_rules_before_the_first_user_agent_are_ignored():
    robots = RobotsTxt.parse("Disallow: /x\nCrawl-delay: 9\nUser-agent: *\nDisallow: /y\n")
    assert robots.allowed("/x", "mybot")
    assert not robots.allowed("/y", "mybot")
    assert robots.crawl_delay("mybot") is None


def test_rfc_2_1_last_group_without_rules_allows_everything():
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /\n\nUser-agent: quxbot\n")
    assert robots.allowed("/anything", "quxbot")


def test_rfc_3_1_simple_example():
    robots = RobotsTxt.parse(
        "User-Agent : foobot\nDisallow : /example/page.html\nDisallow : /example/disallowed.gif\n\n"
        "User-Agent : barbot\nUser-Agent : bazbot\nAllow : /example/page.html\n"
        "Disallow : /example/disallowed.gif\n\nUser-Agent: quxbot\n"
    )
    assert not robots.allowed("/example/page.html", "foobot")
    assert robots.allowed("/example/page.html", "barbot")
    assert not robots.allowed("/example/disallowed.gif", "bazbot")
    assert robots.allowed("/example/disallowed.gif", "quxbot")


def test_select_reports_the_applying_groups_with_their_lines():
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /\n\nUser-agent: MyBot\nAllow: /\n")
    selection = robots.select("MyBot/1.0")
    assert selection.token == "mybot"
    assert [g.line for g in selection.groups] == [4]
    assert not selection.is_star


def test_rfc_2_1_a_group_gives_its_rules_in_file_order_from_its_columns():
    group = RobotsTxt.parse("User-agent: a\nAllow: /x\nDisallow: /y\n").groups[0]
    assert group.patterns == ["/x", "/y"]
    assert group.rules == [Rule(True, "/x", 2), Rule(False, "/y", 3)]
    group.rules.append(Rule(True, "/z", 9))  # a new list each time it is read
    assert len(group.rules) == 2
    group.add_rule(False, "/z", 2**32 - 1)
    assert group.rules[-1] == Rule(False, "/z", 2**32 - 1)


def test_rfc_2_2_1_a_name_spelled_the_same_on_both_sides_matches_outside_ascii_too():
    """Scrapy's own parser-interface test (``test_unicode_url_and_useragent``): a
    crawler named ``UnicödeBöt`` gets the group ``User-Agent: UnicödeBöt``."""
    robots = RobotsTxt.parse(
        "User-Agent: *\nDisallow: /admin/\nDisallow: /wiki/Käyttäjä:\n"
        "User-Agent: UnicödeBöt\nDisallow: /some/randome/page.html\n"
    )
    assert robots.allowed("https://site.local/some/randome/page.html", "*")
    assert not robots.allowed("https://site.local/some/randome/page.html", "UnicödeBöt")
    assert robots.allowed("https://site.local/admin/", "UnicödeBöt")  # its own group only
    assert not robots.allowed("https://site.local/wiki/K%C3%A4ytt%C3%A4j%C3%A4:x", "*")
    # A trailing * or version still ends the name in the file.
    robots = RobotsTxt.parse("User-agent: Foo*\nDisallow: /\n")
    assert not robots.allowed("/x", "Foo") and robots.allowed("/x", "FooBot")


def test_the_robotstxt_parser_adapter_passes_scrapys_unicode_interface_test():
    """Scrapy's ``test_unicode_url_and_useragent``, as Scrapy's own parser tests call
    a ``ROBOTSTXT_PARSER``: without a crawler."""
    from scrapy_rfc9309 import RobotParser

    body = (
        "User-Agent: *\nDisallow: /admin/\nDisallow: /static/\n"
        "Disallow: /wiki/K%C3%A4ytt%C3%A4j%C3%A4:\nDisallow: /wiki/Käyttäjä:\n"
        "User-Agent: UnicödeBöt\nDisallow: /some/randome/page.html"
    ).encode()
    parser = RobotParser.from_crawler(crawler=None, robotstxt_body=body)
    assert parser.allowed("https://site.local/", "*")
    assert not parser.allowed("https://site.local/admin/", "*")
    assert not parser.allowed("https://site.local/static/", "*")
    assert parser.allowed("https://site.local/admin/", "UnicödeBöt")
    assert not parser.allowed("https://site.local/wiki/K%C3%A4ytt%C3%A4j%C3%A4:", "*")
    assert not parser.allowed("https://site.local/wiki/Käyttäjä:", "*")
    assert parser.allowed("https://site.local/some/randome/page.html", "*")
    assert not parser.allowed("https://site.local/some/randome/page.html", "UnicödeBöt")
