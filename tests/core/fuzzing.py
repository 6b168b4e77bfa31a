"""Fuzzing the core: grammar-shaped and random robots.txt bodies, and the check every
input must pass (parse, check, delays: never raise, answers well-formed)."""

from hypothesis import strategies as st

from scrapy_rfc9309 import RobotsTxt

_KEYS = st.sampled_from(
    [
        "User-agent",
        "user-agent",
        "useragent",
        "Allow",
        "Disallow",
        "dissallow",
        "Crawl-delay",
        "Request-rate",
        "Sitemap",
        "Host",
        "",
    ]
)
_VALUES = st.one_of(
    st.text(alphabet="/ab*$%?=&.~2F4", max_size=30),
    st.sampled_from(["*", "MyBot", "mybot/1.0", "1", "0.5", "1/5", "3/1m", "1e9", "-1", "nan"]),
    st.integers(min_value=0).map(str),
    st.integers(min_value=0, max_value=5000).map(lambda n: "9" * n + "/5"),  # huge numbers
    st.text(max_size=20),
)
_SEPARATORS = st.sampled_from([":", ": ", " ", ":\t", ""])
_ENDINGS = st.sampled_from(["\n", "\r\n", "\r", " # comment\n", ""])
_LINES = st.tuples(_KEYS, _SEPARATORS, _VALUES, _ENDINGS).map("".join)
_GRAMMAR = st.lists(_LINES, max_size=40).map("".join)
# A line repeated many times: the shapes that were quadratic or slow to check.
_REPEATED = st.tuples(_LINES, st.integers(min_value=1, max_value=500)).map(
    lambda pair: "User-agent: *\n" + (pair[0] + "\n") * pair[1]
)

BODIES = st.one_of(_GRAMMAR, _GRAMMAR.map(str.encode), st.binary(max_size=500), _REPEATED)
URLS = st.one_of(
    st.text(alphabet="/ab*$%?=&.~2F4#", max_size=40).map(lambda p: "http://h/" + p),
    st.text(max_size=40),
)
USER_AGENTS = st.sampled_from(["MyBot", "mybot/2.0 (+http://x)", "other", ""])


def parse_and_check(body: bytes | str, url: str, user_agent: str) -> None:
    robots = RobotsTxt.parse(body)
    verdict = robots.check(url, user_agent)
    assert isinstance(verdict.allowed, bool)
    delay = robots.delay(user_agent)
    assert delay is None or delay >= 0
    robots.request_rate(user_agent)
    robots.select(user_agent)
