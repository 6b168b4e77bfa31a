"""RFC 9309 §2.2.2 and §2.2.3: rule matching, longest match, special characters, encoding."""

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from scrapy_rfc9309 import RobotsTxt
from scrapy_rfc9309.robots import Rule
from scrapy_rfc9309.robots._model import decision_key, decision_keys, rule_key, rule_of
from scrapy_rfc9309.robots._pattern import canonical, compile_pattern
from scrapy_rfc9309.robots._robotstxt import _uncommon_path_of, path_of

BOT = "MyBot"


def robots(*rules: str) -> RobotsTxt:
    return RobotsTxt.parse("User-agent: *\n" + "\n".join(rules) + "\n")


def test_rfc_3_2_longest_match_wins():
    r = robots("Allow: /example/page/", "Disallow: /example/page/disallowed.gif")
    assert not r.allowed("/example/page/disallowed.gif", BOT)
    assert r.allowed("/example/page/other", BOT)


def test_rfc_2_2_2_longest_match_is_independent_of_order():
    r = robots("Disallow: /example/page/disallowed.gif", "Allow: /example/page/")
    assert not r.allowed("/example/page/disallowed.gif", BOT)


def test_rfc_2_2_2_equal_length_allow_wins():
    for order in (("Allow: /page", "Disallow: /page"), ("Disallow: /page", "Allow: /page")):
        verdict = robots(*order).check("/page", BOT)
        assert verdict.allowed and verdict.rule == "Allow: /page"


def test_rfc_2_2_2_length_is_measured_in_octets_of_the_pattern():
    # "/*.html" is 7 octets, "/a/" is 3: the wildcard rule is more specific.
    r = robots("Allow: /a/", "Disallow: /*.html")
    assert not r.allowed("/a/b.html", BOT)


def test_rfc_2_2_2_decision_keys_all_at_once_order_as_one_by_one():
    """Longest first, Allow before Disallow on a tie, then the earliest line."""
    rules = [
        (length, allow, line)
        for length in (0, 1, 7, 2_000)
        for allow in (True, False)
        for line in (1, 2, 2**32 - 1)
    ]
    lengths = [length for length, _, _ in rules]
    rule_keys = [rule_key(allow, line) for _, allow, line in rules]
    keys = list(decision_keys(lengths, rule_keys))
    assert keys == list(map(decision_key, lengths, rule_keys))
    assert [rule_of("/", key) for key in rule_keys] == [
        Rule(allow, "/", line) for _, allow, line in rules
    ]
    ordered = [rule for _, rule in sorted(zip(keys, rules, strict=True))]
    assert ordered == sorted(rules, key=lambda rule: (-rule[0], not rule[1], rule[2]))


def test_rfc_2_2_2_no_match_means_allowed():
    verdict = robots("Disallow: /private").check("/public", BOT)
    assert verdict.allowed and verdict.rule is None and verdict.line is None


def test_rfc_2_2_2_empty_disallow_and_allow_are_no_rule():
    r = robots("Disallow:", "Allow:")
    assert r.allowed("/anything", BOT)
    assert r.rules(BOT) == []


def test_rfc_2_2_2_matching_is_case_sensitive():
    r = robots("Disallow: /Private")
    assert not r.allowed("/Private/x", BOT)
    assert r.allowed("/private/x", BOT)


@pytest.mark.parametrize("checked_before", [0, 1, 2], ids=["first check", "second", "later"])
def test_rfc_2_2_2_robots_txt_is_always_allowed(checked_before):
    for url, allowed in [
        ("https://example.com/robots.txt", True),
        ("/robots.txt?x=1", True),
        ("/robots.txt.bak", False),
    ]:
        r = robots("Disallow: /")
        for _ in range(checked_before):  # the first check tries the rules, the second compiles
            assert not r.allowed("/x", BOT)
        assert r.allowed(url, BOT) is allowed


def test_rfc_2_2_2_verdict_names_the_deciding_rule_and_line():
    r = RobotsTxt.parse("User-agent: *\n# c\nDisallow: /a\nAllow: /a/b\n")
    v = r.check("/a/c", BOT)
    assert (v.allowed, v.rule, v.line) == (False, "Disallow: /a", 3)
    v = r.check("/a/b", BOT)
    assert (v.allowed, v.rule, v.line) == (True, "Allow: /a/b", 4)


def test_rfc_2_2_2_query_is_part_of_the_matched_path():
    r = robots("Disallow: /search?q=")
    assert not r.allowed("https://e.com/search?q=x", BOT)
    assert r.allowed("https://e.com/search", BOT)


def test_rfc_2_2_2_a_url_without_a_path_is_checked_as_the_path_slash():
    r = robots("Disallow: /$")
    assert not r.allowed("https://e.com", BOT)  # the first check, one rule at a time
    assert not r.allowed("https://e.com", BOT)  # the rules compiled
    assert r.allowed("https://e.com/a", BOT)


def test_fragment_is_not_part_of_the_matched_path():
    r = robots("Disallow: /a$")
    assert not r.allowed("https://e.com/a#frag", BOT)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://e.com", "/"),
        ("", "/"),
        ("https://e.com/", "/"),
        ("https://e.com?q=1", "/?q=1"),
        ("https://e.com:8080/a/b?c#d", "/a/b?c"),
        ("http://user@e.com/x", "/x"),
        ("/a?b", "/a?b"),
        ("//e.com/x", "/x"),
    ],
)
def test_path_of_urls_and_paths(url, path):
    assert path_of(url) == path


url_parts = st.text(alphabet="hs:/?#@.e%%%207AaCF4 \u00e9", max_size=14)


@given(st.one_of(url_parts, url_parts.map("https://".__add__)))
@example("https://e.com")
@example("https://e.com?q")
@example("https://e.com//a")
@example("https://e.com/%C3%A9?q=%2F")
@example("/%2A")
@example("/%24")
@example("/%7e")
@example("/%41")
@example("/%c3")
@example("/a%2")
def test_rfc_2_2_2_path_of_takes_the_canonical_path_in_one_step_as_the_long_way_does(url):
    # The one regular expression path_of tries first, for URLs already canonical
    # (escapes included).
    assert path_of(url) == _uncommon_path_of(url)


# -- §2.2.3 special characters ----------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("/this/*/exactly", "/this/a/b/exactly", True),
        ("/this/*/exactly", "/this/exactly", False),
        ("/*.php", "/index.php?x", True),
        ("/*.php$", "/index.php", True),
        ("/*.php$", "/index.php?x", False),
        ("/fish*", "/fish", True),
        ("/fish*", "/fishheads/x", True),
        ("/fish*", "/Fish", False),
        ("*", "/anything", True),
        ("/a**b", "/a/x/b", True),
        ("/exact$", "/exact", True),
        ("/exact$", "/exact/", False),
        ("/a$b", "/a$b", True),  # "$" before the end is a literal
        ("/a$b", "/a", False),
        ("/a*b$", "/ab", True),
        ("/a*b$", "/abxb", True),
        ("/a*b$", "/abx", False),
        ("/a*bb$", "/abb", True),
        ("/a*ab$", "/ab", False),  # the anchored tail may not overlap the prefix
        ("/*$", "/", True),
        ("$", "/", False),
    ],
)
def test_rfc_2_2_3_wildcard_and_anchor(pattern, path, matches):
    assert compile_pattern(pattern).matches(path) is matches


def test_rfc_2_2_3_percent_encoded_star_and_dollar_match_literal_characters():
    # More rules under each prefix than a leaf of the rule index holds: the literal
    # "*" and "$" also place the rules in the index.
    others = [f"Disallow: /path/{name}-{n}" for name in ("file-with-a", "foo") for n in range(40)]
    r = robots("Disallow: /path/file-with-a-%2A.html", "Disallow: /path/foo-%24", *others)
    for _ in range(2):  # the first checks, then the compiled rules
        assert not r.allowed("https://www.example.com/path/file-with-a-*.html", BOT)
        assert r.allowed("https://www.example.com/path/file-with-a-x.html", BOT)
        assert not r.allowed("https://www.example.com/path/foo-$", BOT)
        # %24 is a literal, not an end anchor: a longer path still starts with it.
        assert not r.allowed("https://www.example.com/path/foo-$/more", BOT)


@pytest.mark.parametrize(
    ("literal", "special", "path"),
    [("/%2a", "/*", "/"), ("/a%24", "/a$", "/a")],
)
def test_rfc_2_2_3_an_encoded_star_or_dollar_is_not_taken_for_the_wildcard_or_anchor(
    literal, special, path
):
    # Both rules are as long once canonical; the literal one is first and never
    # matches here: the wildcard or anchor one decides, on every check.
    r = robots(f"Disallow: {literal}", f"Disallow: {special}")
    for _ in range(3):  # the first check, then the compiled rules
        assert r.check(path, BOT) == (False, f"Disallow: {special}", 3)


# -- §2.2.2 percent-encoding ---------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "url", "matches"),
    [
        # The RFC's own table: path / encoded / matched against.
        ("/foo/bar?baz=quz", "/foo/bar?baz=quz", True),
        ("/foo/bar?baz=http://foo.bar", "/foo/bar?baz=http%3A%2F%2Ffoo.bar", False),
        ("/foo/bar?baz=http%3A%2F%2Ffoo.bar", "/foo/bar?baz=http%3A%2F%2Ffoo.bar", True),
        ("/foo/bar/ツ", "/foo/bar/%E3%83%84", True),
        ("/foo/bar/%E3%83%84", "/foo/bar/ツ", True),
        ("/foo/bar/%e3%83%84", "/foo/bar/%E3%83%84", True),
        ("/foo/bar/%62%61%7A", "/foo/bar/baz", True),
        ("/foo/bar/baz", "/foo/bar/%62%61%7A", True),
        # Reserved characters stay encoded: %2F is not "/".
        ("/a%2Fb", "/a/b", False),
        ("/a/b", "/a%2Fb", False),
        ("/a%2fb", "/a%2Fb", True),
        # Non-URI ASCII characters and lone "%" are encoded the same way on both sides.
        ("/a b", "/a%20b", True),
        ("/100%", "/100%25", True),
    ],
)
def test_rfc_2_2_2_rule_and_url_are_normalised_the_same_way(rule, url, matches):
    r = robots(f"Disallow: {rule}")
    assert r.allowed(url, BOT) is not matches


def test_canonical_is_idempotent_on_examples():
    for text in ["/a%2fb", "/ツ", "/%7e", "/a b", "/100%", "/%2A%24"]:
        once = canonical(text)
        assert canonical(once) == once


def test_canonical_forms():
    assert canonical("/%7e%41%2f") == "/~A%2F"
    assert canonical("/é") == "/%C3%A9"
    assert canonical("/%2a%24") == "/*$"
    assert canonical("/plain/path?q=1") == "/plain/path?q=1"
