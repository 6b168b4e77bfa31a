"""Content-Usage (IETF AIPREF drafts: attach-05, vocab-07) and Content-Signal lines:
the preferences that apply to a URL, with their lines; never a change of verdict."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scrapy_rfc9309.robots import RobotsTxt
from scrapy_rfc9309.robots._preferences import parse_preference
from tests.helpers import examples

# The example robots.txt of draft-ietf-aipref-attach-05 §3.4.
DRAFT_EXAMPLE = b"""User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: / train-ai=n
Content-Usage: /ai-ok/ train-ai=y

User-Agent: ExampleBot
Allow: /
Content-Usage: / train-ai=y
"""


def test_the_attachment_drafts_example_table():
    robots = RobotsTxt.parse(DRAFT_EXAMPLE)
    assert robots.preferences("/test", "OtherBot").usage == {"train-ai": "n"}
    assert not robots.preferences("/never/test", "OtherBot")  # not crawlable: N/A
    ok = robots.preferences("https://example.com/ai-ok/test", "OtherBot")
    assert ok.usage == {"train-ai": "y"}
    assert ok.lines == ((5, "Content-Usage: /ai-ok/ train-ai=y"),)  # the deciding line
    assert robots.preferences("/never/test", "ExampleBot").usage == {"train-ai": "y"}


def test_the_longest_path_decides_and_wildcards_match_as_in_rules():
    robots = RobotsTxt.parse(
        b"User-agent: *\nContent-Usage: /a train-ai=y\nContent-Usage: /a*.pdf$ train-ai=n\n"
    )
    assert robots.preferences("/a/b.pdf", "bot").usage == {"train-ai": "n"}
    assert robots.preferences("/a/b.html", "bot").usage == {"train-ai": "y"}
    assert not robots.preferences("/b", "bot")  # no line applies: unknown


def test_conflicting_lines_with_the_same_path_combine_to_the_most_restrictive():
    robots = RobotsTxt.parse(
        b"User-agent: *\n"
        b"Content-Usage: /x train-ai=y, search=y\n"
        b"Content-Usage: /x train-ai=n, ai-use=maybe\n"
    )
    found = robots.preferences("/x/1", "bot")
    assert found.usage == {"train-ai": "n", "search": "y", "ai-use": "maybe"}
    assert [line for line, _ in found.lines] == [2, 3]


def test_unknown_categories_are_kept_and_non_tokens_are_unknown():
    assert parse_preference('train-ai=y, future-use=n, foo="n", bar') == {
        "train-ai": "y",
        "future-use": "n",
    }


def test_malformed_lines_and_lines_outside_a_group_are_ignored_and_listed():
    robots = RobotsTxt.parse(
        b"Content-Usage: train-ai=n\n"  # before any group
        b"User-agent: *\n"
        b"Content-Usage: /x Train-AI=n\n"  # uppercase keys are not a dictionary
        b"Content-Signal: search=yes,, ai-train=no\n"
        b"Content-Usage: /y train-ai=n\n"
    )
    assert [line for line, _ in robots.ignored] == [1, 3, 4]
    assert "before any User-agent line" in robots.ignored[0][1]
    assert robots.preferences("/y", "bot").usage == {"train-ai": "n"}


def test_content_signal_lines_and_a_line_without_a_path():
    robots = RobotsTxt.parse(
        b"User-Agent: *\nContent-Signal: ai-train=no, search=yes, ai-input=yes\nAllow: /\n"
        b"Content-Usage: train-ai=n\n"
    )
    found = robots.preferences("/any", "bot")
    assert found.signals == {"ai-train": "no", "search": "yes", "ai-input": "yes"}
    assert found.usage == {"train-ai": "n"}
    assert found.refused(["ai-train"]) == "ai-train"
    assert found.refused(["search"]) is None


def test_a_use_is_named_once_and_refused_in_either_vocabulary():
    signal_only = RobotsTxt.parse(
        b"User-agent: *\nContent-Signal: search=yes,ai-train=no,use=reference\n"
    ).preferences("/p", "bot")
    assert signal_only.refused(["train-ai"]) == "train-ai"  # AIPREF's name, Cloudflare's no
    assert signal_only.refused(["ai-train"]) == "ai-train"
    assert signal_only.refused(["search", "ai-use", "ai-input"]) is None
    usage_only = RobotsTxt.parse(
        b"User-agent: *\nContent-Usage: / train-ai=n, search=n, ai-use=n\n"
    ).preferences("/p", "bot")
    assert usage_only.refused(["ai-train"]) == "ai-train"  # Cloudflare's name, AIPREF's n
    assert usage_only.refused(["search"]) == "search"
    assert usage_only.refused(["ai-use"]) == "ai-use"
    assert usage_only.refused(["ai-input"]) is None  # not the same use as ai-use
    inputs = RobotsTxt.parse(b"User-agent: *\nContent-Signal: ai-input=no\n").preferences(
        "/p", "bot"
    )
    assert inputs.refused(["ai-use"]) is None and inputs.refused(["ai-input"]) == "ai-input"


def test_the_lines_neither_start_nor_end_a_group():
    robots = RobotsTxt.parse(
        b"User-agent: a\nContent-Usage: / train-ai=n\nUser-agent: b\nDisallow: /x\n"
    )
    assert len(robots.groups) == 1  # a and b share the group, as with Crawl-delay
    assert robots.preferences("/y", "b").usage == {"train-ai": "n"}


def test_a_header_wins_over_robots_txt_for_its_response():
    robots = RobotsTxt.parse(b"User-agent: *\nContent-Usage: / train-ai=y, search=y\n")
    found = robots.preferences("/p", "bot").with_header({"train-ai": "n"})
    assert found.usage == {"train-ai": "n", "search": "y"}


preference_lines = st.sampled_from(
    [
        "Content-Usage: / train-ai=n",
        "Content-Usage: /a train-ai=y",
        "content-signal: search=no",
        "Content-Usage: garbage ===",
        "Content-Usage: /a*$ x=n",
    ]
)
base_lines = st.sampled_from(
    ["User-agent: *", "User-agent: bot", "Allow: /a", "Disallow: /", "Disallow: /a$", "", "#"]
)


@examples(300)
@given(
    st.lists(base_lines, max_size=12),
    st.lists(st.tuples(st.integers(0, 12), preference_lines), max_size=6),
    st.sampled_from(["/", "/a", "/ab", "/b", "/a/x"]),
)
def test_preference_lines_never_change_a_verdict(lines, inserted, path):
    with_preferences = list(lines)
    for position, line in inserted:
        with_preferences.insert(min(position, len(with_preferences)), line)
    plain = RobotsTxt.parse("\n".join(lines))
    extended = RobotsTxt.parse("\n".join(with_preferences))
    for agent in ("bot", "other"):
        assert extended.check(path, agent).allowed == plain.check(path, agent).allowed


def test_page_directives_for_the_crawler_or_all():
    from scrapy_rfc9309.robots._pagedirectives import page_directives

    assert page_directives(["noindex, NoFollow"], [], "testbot") == {"noindex", "nofollow"}
    assert page_directives(["otherbot: nofollow"], [], "testbot") == set()
    assert page_directives(["TestBot/2.0: nofollow"], [], "testbot") == {"nofollow"}
    assert page_directives(["unavailable_after: 25 Jun 2010"], [], "testbot") == {
        "unavailable_after: 25 jun 2010"
    }
    assert page_directives([], [("robots", "none")], "testbot") == {"none", "noindex", "nofollow"}
    assert page_directives([], [("OtherBot", "noai"), ("TESTBOT", "noai")], "testbot") == {"noai"}
    assert page_directives([], [("description", "nofollow")], "testbot") == set()


def test_meta_tags_are_read_in_the_documents_head():
    from scrapy_rfc9309.robots import html_head

    page = b'<html><head><meta name="robots" content="nofollow"></head><body>' + b"x" * 100
    assert html_head(page) == b'<html><head><meta name="robots" content="nofollow">'
    assert (
        html_head(b"<HTML><HEAD><TITLE>t</TITLE></HEAD><BODY>b") == b"<HTML><HEAD><TITLE>t</TITLE>"
    )
    # Both the head's end tag and the body's start tag may be left out.
    assert html_head(b"<title>t</title><meta name=robots content=none><Body>b") == (
        b"<title>t</title><meta name=robots content=none>"
    )
    assert (
        html_head(b"<meta name=robots content=none><p>x") == b"<meta name=robots content=none><p>x"
    )
    # <bodyguard> is not a body
    assert html_head(b"<bodyguard></bodyguard><BODY>") == b"<bodyguard></bodyguard>"
