"""RFC 9309 §2.2 syntax: line ends, comments, BOM, encodings, the size limit (§2.5)."""

from pathlib import Path

from scrapy_rfc9309 import RobotsTxt
from scrapy_rfc9309.robots import _lexer as lexer
from tests.core import reference_lexer

BOT = "MyBot"


def test_rfc_2_2_lf_cr_and_crlf_line_ends_are_equivalent():
    for nl in ("\n", "\r", "\r\n"):
        robots = RobotsTxt.parse(nl.join(["User-agent: *", "Disallow: /a", "Allow: /a/b"]))
        assert not robots.allowed("/a/x", BOT), repr(nl)
        assert robots.allowed("/a/b", BOT), repr(nl)


def test_rfc_2_2_cr_only_file_keeps_line_numbers():
    robots = RobotsTxt.parse(b"User-agent: *\r\rDisallow: /a\r")
    assert robots.check("/a", BOT).line == 3


def test_rfc_2_2_other_unicode_line_separators_are_not_line_ends():
    # A form feed or NEL inside a line is no line break in a robots.txt.
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /a\x0cb\u2028c\n")
    assert robots.rules(BOT)[0].pattern == "/a\x0cb\u2028c"


def test_rfc_2_2_comments_are_stripped_anywhere_on_a_line():
    robots = RobotsTxt.parse(b"# header\nUser-agent: * # all\nDisallow: /x # not /y\n")
    assert not robots.allowed("/x", BOT)
    assert robots.allowed("/y", BOT)


def test_rfc_2_2_whitespace_around_key_colon_and_value():
    robots = RobotsTxt.parse(b"  User-Agent  :   foobot  \n\tDisallow\t:\t/a\t\n")
    assert not robots.allowed("/a", "foobot")


def test_rfc_2_2_keys_are_case_insensitive():
    robots = RobotsTxt.parse(b"USER-AGENT: *\nDISALLOW: /a\nallow: /a/b\n")
    assert not robots.allowed("/a", BOT)
    assert robots.allowed("/a/b", BOT)


def test_rfc_2_3_utf8_bom_is_skipped():
    robots = RobotsTxt.parse(b"\xef\xbb\xbfUser-agent: *\nDisallow: /a\n")
    assert not robots.allowed("/a", BOT)
    assert not RobotsTxt.parse("\ufeffUser-agent: *\nDisallow: /a\n").allowed("/a", BOT)


def test_rfc_2_3_invalid_utf8_never_crashes_and_keeps_the_octet():
    # A Latin-1 "é" (0xE9) is no UTF-8; the rule still matches the URL that has it.
    robots = RobotsTxt.parse(b"User-agent: *\nDisallow: /caf\xe9\n\xff\xfe\x00garbage\n")
    assert not robots.allowed("/caf%E9", BOT)
    assert robots.allowed("/caf%C3%A9", BOT)


def test_rfc_2_3_1_parse_errors_do_not_stop_the_parse():
    body = b"User-agent: *\nthis is not a record\n: no key\nDisallow: /a\n"
    assert not RobotsTxt.parse(body).allowed("/a", BOT)


def test_rfc_2_2_unknown_records_are_reported_as_unknown():
    recs = list(reference_lexer.records(b"User-agent: *\nNoindex: /x\n"))
    assert [r.directive for r in recs] == [lexer.USER_AGENT, lexer.UNKNOWN]
    assert recs[1].key == "noindex" and recs[1].value == "/x" and recs[1].line == 2


def test_rfc_2_5_at_least_500_kib_are_parsed():
    filler = b"# " + b"x" * 97 + b"\n"  # 100-byte comment lines
    body = b"User-agent: *\n" + filler * 5100 + b"Disallow: /late\n"  # rule at ~510,014 bytes
    assert len(body) < lexer.DEFAULT_MAX_BYTES + 1000
    robots = RobotsTxt.parse(body, max_bytes=len(body))
    assert not robots.allowed("/late", BOT)
    # Within the default 512,000-byte limit a rule at byte ~510,000 is read.
    assert not RobotsTxt.parse(body).allowed("/late", BOT)


def test_rfc_2_5_content_beyond_the_limit_is_ignored_at_a_line_boundary():
    head = b"User-agent: *\nDisallow: /early\n"
    body = head + b"Disallow: /cut-in-the-middle-of-this-line\nDisallow: /late\n"
    limit = len(head) + 20  # falls inside the third line
    robots = RobotsTxt.parse(body, max_bytes=limit)
    assert robots.truncated
    assert not robots.allowed("/early", BOT)
    # The half line is dropped, not read as "Disallow: /cut-in-th".
    assert robots.allowed("/cut-in-th", BOT)
    assert robots.allowed("/late", BOT)


def test_rfc_2_5_limit_on_an_exact_line_end_keeps_the_last_line():
    body = b"User-agent: *\nDisallow: /a\nDisallow: /b\n"
    robots = RobotsTxt.parse(body, max_bytes=body.index(b"\nDisallow: /b"))
    assert robots.truncated
    assert not robots.allowed("/a", BOT)
    assert robots.allowed("/b", BOT)


def test_truncate_reports_nothing_cut_for_small_bodies():
    assert lexer.truncate(b"abc", 10) == (b"abc", False)


def _model(robots: RobotsTxt) -> tuple[object, ...]:
    groups = [(g.agents, g.line, g.rules, g.crawl_delays, g.preferences) for g in robots.groups]
    return groups, robots.sitemaps, robots.ignored, robots.lenient_lines


def test_rfc_2_2_a_file_read_in_chunks_of_lines_is_the_file_read_whole(monkeypatch):
    """Big files are split into lines a chunk at a time (not all line strings alive
    at once): every line, line number and record is the same as read whole, with
    chunk ends on LF, on CR and CRLF line ends, and inside a group."""
    corpus = Path(__file__).resolve().parents[1] / "data" / "robots-corpus" / "files"
    bodies = [path.read_bytes() for path in sorted(corpus.glob("*.txt"))[:40]]
    bodies.append(b"User-agent: a\r\nDisallow: /x\rAllow: /y\r\n\r\nSitemap: /s\nCrawl-delay: x\n")
    whole = [_model(RobotsTxt.parse(body)) for body in bodies]
    for size in (1, 7, 64):
        monkeypatch.setattr(lexer, "LINE_CHUNK", size)
        assert [_model(RobotsTxt.parse(body)) for body in bodies] == whole, size
