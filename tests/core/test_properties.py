"""Property tests: the parser never raises; the fast matcher and the inline lexer agree
with their references."""

import time
from collections import Counter
from itertools import chain
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from scrapy_rfc9309 import RobotsTxt
from scrapy_rfc9309.robots import _grams, _onepass, _pieces, _prefixtree
from scrapy_rfc9309.robots import _lexer as lexer
from scrapy_rfc9309.robots._pattern import canonical, compile_pattern, pattern_texts
from tests.core import reference_lexer
from tests.helpers import examples


def reference_match(pattern: str, path: str) -> bool:
    """Obviously correct (and exponential) matcher: direct recursion on the RFC's
    definition of ``*`` (any sequence) and a final ``$`` (end of path)."""
    if pattern == "":
        return True
    if pattern == "$":
        return path == ""
    head = pattern[0]
    if head == "*":
        return any(reference_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return bool(path) and path[0] == head and reference_match(pattern[1:], path[1:])


# Small alphabets make matches (and near misses) frequent.
patterns = st.text(alphabet="/ab*$", max_size=10).map(lambda s: "/" + s)
paths = st.text(alphabet="/ab$", max_size=14).map(lambda s: "/" + s)


@examples(1000)
@given(patterns, paths)
def test_fast_matcher_agrees_with_reference(pattern, path):
    assert compile_pattern(pattern).matches(path) is reference_match(pattern, path)


@examples(500)
@given(st.binary(max_size=2000))
def test_parsing_arbitrary_bytes_never_raises(body):
    robots = RobotsTxt.parse(body)
    robots.check("/some/path?q=1", "MyBot")
    robots.crawl_delay("MyBot")


@examples(300)
@given(st.text(max_size=500), st.text(max_size=80))
def test_parsing_and_checking_arbitrary_text_never_raises(body, url):
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /\n" + body)
    robots.check(url, "MyBot")


@examples(300)
@given(
    st.lists(st.tuples(st.booleans(), patterns), max_size=8),
    paths,
)
def test_verdict_is_the_longest_matching_rule_allow_on_ties(rules, path):
    assert_decides_like_the_reference(rules, path)


# Two parts in three plain prefixes sharing their first characters: the index splits deep.
prefixes = st.text(alphabet="ab", max_size=6).map(lambda s: "/" + s)
index_patterns = st.one_of(prefixes, prefixes, patterns)


@examples(150)
@given(st.lists(st.tuples(st.booleans(), index_patterns), min_size=17, max_size=40), paths)
def test_the_rule_index_splits_and_still_decides_like_the_reference(rules, path):
    """More rules than a leaf of the rule index holds (16): its inner nodes decide."""
    assert_decides_like_the_reference(rules, path)


@examples(150)
@given(st.lists(st.tuples(st.booleans(), index_patterns), max_size=40), paths)
def test_the_heavy_check_decides_like_the_reference(rules, path):
    """With every check taken as heavy (see _grams.HEAVY_WORK), rules are first
    looked up by their literal pieces among the path's substrings."""
    with (
        mock.patch.object(_prefixtree, "HEAVY_WORK", -1),
        mock.patch.object(_onepass, "HEAVY_WORK", -1),
    ):
        assert_decides_like_the_reference(rules, path)


@examples(300)
@given(st.lists(st.tuples(st.booleans(), index_patterns), max_size=40), paths)
# A longer prefix rule decides before a matching wildcard rule; and a segment found
# first too early, then again where it may start.
@example([(False, "/abc"), (True, "/*c")], "/abc")
@example([(False, "/b*ab"), (True, "/a")], "/bab/ab")
@example([(False, "/*a*b$")], "/ab")  # the tail right after the last segment
# A piece every rule names, found in the path only before, then just where it may be.
@example([(False, "/*a*b")], "/ba")
@example([(False, "/*a*b")], "/ab")
# Two rules filed under one key, the first in decision order not matching.
@example([(True, "/*ab*ab"), (False, "/*ab")], "/ab")
def test_the_piece_index_decides_like_the_reference(rules, path):
    """With every file taken as one of thousands of wildcard rules (see
    _prefixtree.PIECE_INDEX_AT), and none as one leaf (LEAF_SIZE), those rules are
    found by their rarest literal piece and tried with the positions of their pieces
    shared between rules.  Their keys are looked up both ways: the path's substrings
    bisected among the sorted keys, and the keys scanned for them."""
    for bisections in (0, 10**9):  # never scan, always scan
        with (
            mock.patch.object(_prefixtree, "PIECE_INDEX_AT", -1),
            mock.patch.object(_prefixtree, "LEAF_SIZE", 0),
            mock.patch.object(_pieces, "_BISECTIONS", bisections),
        ):
            assert_decides_like_the_reference(rules, path)


def test_the_piece_index_chooses_each_rules_rarest_key_run_by_run_as_rule_by_rule():
    # Runs of rules of one piece, of two (one a tie), of three, of four, and mixed,
    # longer than a run: each rule's rarest key, the last on a tie, as chosen rule by
    # rule.
    pieces = (
        [[f"{n}"] for n in range(300)]
        + [[f"piece-{n}-longer-than-a-key"] for n in range(300)]
        + [[f"{n % 7}", "zz"] for n in range(300)]  # "zz" the most common
        + [["ab", "cd"] for _ in range(300)]  # a tie: "cd"
        + [[f"{n}", "ef"] for n in range(300)]
        + [[f"{n % 3}", f"piece-{n}-longer-than-a-key"] for n in range(300)]
        + [[f"{n % 5}", f"{n}", "zz"] for n in range(300)]
        + [["gh", f"{n % 11}", "gh", "ij"] for n in range(300)]  # ties among four
        + [[f"{n}", "zz"] if n % 2 else [f"{n % 9}"] for n in range(300)]
        + [[f"piece-{n}-longer-than-a-key", "zz"] for n in range(300)]
    )
    texts = ["/*" + "*".join(each) for each in pieces]
    assert [size for size, _ in _pieces._piece_runs(texts)].count(0) >= 2  # mixed runs
    counts = Counter(map(_pieces.cut_key, chain.from_iterable(pieces)))
    chosen = _pieces._rarest_keys(_pieces._piece_runs(texts), counts)
    one_by_one = [
        min(reversed(list(map(_pieces.cut_key, each))), key=counts.__getitem__) for each in pieces
    ]
    assert chosen == one_by_one
    assert chosen[900:1200] == ["cd"] * 300 and chosen[-1] == "piece-29"


def test_the_piece_index_drops_the_rules_of_a_common_piece_only_where_it_is_absent():
    # 1,600 rules whose pieces are all in the path but "zz", which they all name: a
    # check drops them together, and only while "zz" is absent.
    rules = "".join(f"Disallow: /*{i}*{j}*zz\n" for i in range(100, 140) for j in range(300, 340))
    robots = RobotsTxt.parse("User-agent: *\n" + rules)
    digits = "/" + "".join(map(str, range(1000)))
    for _ in range(2):  # the first check, then the piece index
        assert robots.allowed(digits, "bot")
        assert robots.check(digits + "zz", "bot") == (False, "Disallow: /*100*300*zz", 2)
        assert robots.check(digits + "zz/x", "bot") == (False, "Disallow: /*100*300*zz", 2)


def test_the_piece_index_drops_the_rules_of_a_common_piece_found_only_too_early():
    # 1,200 rules "/*<n>*ab": "ab" at the path's start is before any of them may
    # need it (after "/" and <n>), so no rule is tried; at its end, the first decides.
    body = "User-agent: *\n" + "".join(f"Disallow: /*{n}*ab\n" for n in range(1200))
    digits = "".join(map(str, range(1000)))
    assert rules_tried(body, "/ab" + digits) == 0
    # The longest rules decide first, then the earliest line: the first 4-digit <n>.
    first = next(n for n in range(1000, 1200) if str(n) in digits)
    robots = RobotsTxt.parse(body)
    for _ in range(2):  # the first check, then the piece index
        assert robots.allowed("/ab" + digits, "bot")
        verdict = robots.check("/ab" + digits + "ab", "bot")
        assert verdict == (False, f"Disallow: /*{first}*ab", first + 2)


def test_the_piece_index_drops_only_the_rules_of_a_common_piece_found_too_early():
    # 1,200 rules "/*<n>*ab" and 400 "/*<n>*cd", most of their <n> in the path: "ab" is
    # at its start only, too early for its rules, which are dropped; the first "cd"
    # rule whose <n> is in the path decides (all are as long: the earliest line).
    body = "User-agent: *\n" + "".join(f"Disallow: /*{n}*ab\n" for n in range(1200))
    body += "".join(f"Allow: /*{n}*cd\n" for n in range(1200, 1600))
    digits = "".join(map(str, range(1000)))
    first = next(n for n in range(1200, 1600) if str(n) in digits)
    robots = RobotsTxt.parse(body)
    for _ in range(2):  # the first check, then the piece index
        verdict = robots.check("/ab" + digits + "cd", "bot")
        assert verdict == (True, f"Allow: /*{first}*cd", first + 2)


def test_rfc_2_2_3_a_literal_star_is_one_character_of_the_path_before_a_common_piece():
    # "%2A" (a literal "*") is 3 characters of the rule's text and 1 of the path: "b"
    # at the path's fourth character is where "/7%2A*b" may need it.
    body = "User-agent: *\n" + "".join(f"Disallow: /{n}%2A*b\n" for n in range(1200))
    robots = RobotsTxt.parse(body)
    for _ in range(2):  # the first check, then the piece index
        assert robots.check("/7*b", "bot") == (False, "Disallow: /7%2A*b", 9)


def rules_tried(body, path):
    """How many rules of *body* the compiled piece index tries (shapes) on *path*."""
    robots = RobotsTxt.parse(body)
    robots.prepare("bot")
    with mock.patch.object(_pieces, "_shape_of", wraps=_pieces._shape_of) as shaped:
        robots.check(path, "bot")
    return shaped.call_count


def test_the_piece_index_tries_no_rule_of_a_common_piece_the_path_lacks():
    rules = "".join(f"Disallow: /*{i}*{j}*zz\n" for i in range(100, 140) for j in range(300, 340))
    digits = "/" + "".join(map(str, range(1000)))  # every <i> and <j>, no "zz"
    assert rules_tried("User-agent: *\n" + rules, digits) == 0


def test_the_piece_index_finds_a_tail_among_the_path_ends_only():
    # Each <i> and each tail <j> is named by 40 rules: on the tie the tail is the
    # key, and no tail ends the path.
    rules = "".join(f"Disallow: /*{i}*{j}$\n" for i in range(100, 140) for j in range(300, 340))
    digits = "/" + "".join(map(str, range(1000)))
    assert rules_tried("User-agent: *\n" + rules, digits) == 0


def test_rfc_2_2_3_a_literal_star_piece_drops_no_rule_whose_wildcards_spell_it():
    # "x*y" (a literal "*", written %2A) is a piece most rules name and the path
    # lacks; "/*x*y", whose text also holds "x*y", does not need it and decides.
    rules = "".join(f"Allow: /*x%2Ay*{n}\n" for n in range(1200))
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /*x*y\n" + rules)
    path = "/xAy" + "".join(map(str, range(1000)))
    for _ in range(2):  # the first check, then the piece index
        assert robots.check(path, "bot") == (False, "Disallow: /*x*y", 2)


def test_the_piece_index_finds_a_rule_by_a_tail_longer_than_a_key():
    # The tail's key is its last characters; the pieces longer than a key are cut to
    # their first: a rule is found all the same (the first check, then the index).
    body = "User-agent: *\nDisallow: /*section-of-the-site*.download-archive$\n"
    with mock.patch.object(_prefixtree, "PIECE_INDEX_AT", -1):
        robots = RobotsTxt.parse(body)
        for _ in range(2):
            assert not robots.allowed("/section-of-the-site/a.download-archive", "bot")
            assert robots.allowed("/section-of-the-site/a.download-archive/", "bot")


# Escapes, non-ASCII and patterns without a leading "/": what canonical form changes.
raw_patterns = st.text(alphabet="/ab*$%2Fe\u00e9~", max_size=8).map(lambda s: "/" + s) | st.text(
    alphabet="/ab*$%", max_size=6
)
raw_paths = st.text(alphabet="/ab$%2Fe\u00e9~", max_size=10).map(lambda s: "/" + s)


@examples(400)
@given(st.lists(st.tuples(st.booleans(), raw_patterns), max_size=10), raw_paths)
def test_the_first_check_decides_like_the_rule_index_on_patterns_to_canonicalize(rules, path):
    assert_first_and_compiled_agree(rules, path)


@examples(400)
@given(st.lists(st.tuples(st.booleans(), raw_patterns), max_size=10), raw_paths)
def test_the_first_check_decides_like_the_piece_index_on_patterns_to_canonicalize(rules, path):
    with mock.patch.object(_prefixtree, "PIECE_INDEX_AT", -1):
        assert_first_and_compiled_agree(rules, path)


def assert_first_and_compiled_agree(rules, path):
    """Escapes and non-ASCII in rules and paths: the compiled rules decide as the
    first check does."""
    body = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in rules
    )
    robots = RobotsTxt.parse(body)
    first = robots.check("https://example.com" + path, "bot")
    assert robots.check("https://example.com" + path, "bot") == first  # compiled


def assert_decides_like_the_reference(rules, path):
    """Both ways a file decides: the first check (one pass over the rules) and the
    later ones (the compiled rule index) give the same verdict, the reference's."""
    body = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in rules
    )
    robots = RobotsTxt.parse(body, lenient=False)
    verdict = robots.check("https://example.com" + path, "bot")
    assert robots.check("https://example.com" + path, "bot") == verdict  # compiled
    matching = [(len(p), allow) for allow, p in rules if reference_match(p, path)]
    if path == "/robots.txt" or not matching:
        assert verdict.allowed
    else:
        assert verdict.allowed is max(matching)[1]


def test_adversarial_wildcards_finish_fast():
    """Guard against pathological blow-up (Protego CVE-2026-55520): well under 1 s."""
    body = "User-agent: *\n" + "".join(f"Disallow: /{'*a' * n}*b$\n" for n in (5, 10, 50, 200))
    robots = RobotsTxt.parse(body)
    start = time.process_time()  # CPU time: not inflated by the other tests running
    for length in (1_000, 10_000, 100_000):
        assert robots.allowed("/" + "a" * length, "bot")
    assert time.process_time() - start < 1.0


@examples(500)
@given(st.text(alphabet="ab/", max_size=40), st.text(alphabet="ab/", max_size=20))
def test_path_substrings_answer_like_in(path, literal):
    assert _grams.PathGrams(path).contains(literal) is (literal in path)


def test_a_long_literal_whose_ends_are_in_the_path_is_still_searched_for():
    grams = _grams.PathGrams("/aaaaaaaaXbbbbbbbb")
    assert not grams.contains("aaaaaaaabbbbbbbb")  # both 8-character ends occur
    assert grams.contains("aaaaaaaaXbbbbbbbb")
    assert grams.contains("") and not grams.contains("c")


# -- parse: the inline lexer of RobotsTxt.parse against the reference lexer ----

CORPUS = Path(__file__).resolve().parents[1] / "data" / "robots-corpus" / "files"

line_keys = st.sampled_from(
    [
        "User-agent",
        "user-AGENT ",
        "useragent",
        "Allow",
        "Disallow",
        "dissalow",
        "Sitemap",
        "Crawl-delay",
        "crawl delay",
        "Request-rate",
        "Content-Usage",
        "content-signal",
        "Noindex",
        "",
        " ",
    ]
)
line_values = st.sampled_from(
    ["*", "bot", "Bot/2", "/", "/a", "/a*b$", "", "5", "x", "1/5", "train-ai=n", "/a search=yes"]
)
separators = st.sampled_from([":", ": ", " ", "\t:", "  ", " \t", ":#", " # x "])
lines = st.builds(lambda k, s, v: k + s + v, line_keys, separators, line_values)
files = st.lists(st.one_of(lines, lines, st.text(max_size=12)), max_size=30).map("\n".join)


def model(robots: RobotsTxt) -> tuple:
    return (
        robots.groups,
        robots.sitemaps,
        robots.lenient_lines,
        robots.ignored,
        robots.truncated,
    )


def parsed_from_records(body, lenient):
    raw, truncated = lexer.truncate(
        body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    )
    return reference_lexer.from_records(
        reference_lexer.records(raw, lenient=lenient), truncated=truncated
    )


@examples(400)
@given(files, st.booleans())
def test_parse_builds_what_the_record_stream_builds(body, lenient):
    assert model(RobotsTxt.parse(body, lenient=lenient)) == model(
        parsed_from_records(body, lenient)
    )


def test_parse_builds_what_the_record_stream_builds_for_every_real_file():
    for path in sorted(CORPUS.glob("*.txt")):
        body = path.read_bytes()
        for lenient in (True, False):
            assert model(RobotsTxt.parse(body, lenient=lenient)) == model(
                parsed_from_records(body, lenient)
            ), path.name


def reference_text(raw):
    """A pattern's text form, one pattern and one piece at a time: each literal piece
    made canonical as a path is, then its literal "*" and "$" written "%2A" / "%24"."""
    anchored = raw.endswith("$")
    pieces = [canonical(piece) for piece in (raw[:-1] if anchored else raw).split("*")]
    text = "*".join(piece.replace("*", "%2A").replace("$", "%24") for piece in pieces)
    return text + ("$" if anchored else "")


# Escapes in any case, "%" starting no escape, "$" anywhere, line breaks, lone
# surrogates (a lexer's escaped octets), and any character at all.
text_patterns = st.text(alphabet="/ab*$%2aAfF7e\u00e9 \n\udcff~", max_size=12) | st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=12
)


@examples(500)
@given(st.lists(text_patterns, max_size=60))
# A literal "$" and nothing else to change: the one thing to write in text form.
@example(["/a$b", "/c"])
@example(["/a$$"])
def test_rfc_2_2_3_patterns_take_their_text_form_all_at_once_as_one_by_one(raws):
    assert pattern_texts(raws) == [reference_text(raw) for raw in raws]


@pytest.mark.parametrize("odd", ["\ud800", "\udc0a"])
def test_rfc_2_2_3_a_lone_surrogate_among_characters_to_encode(odd):
    """A lone surrogate that came in as str (UTF-8 cannot take it, and no octet of
    the lexer's escapes it), among other characters to encode: each still encoded
    as one by one."""
    raws = [f"/a{odd}b", "/\u00e9x", f"/*{odd}\u00e9$"]
    assert pattern_texts(raws) == [reference_text(raw) for raw in raws]
