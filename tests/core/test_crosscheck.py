"""Cross-check against Google's C++ parser and Protego over the real robots.txt corpus.

Every disagreement must be explained by one of the reasons listed (with its RFC
section) in ``benchmarks/crosscheck.py``; run that script to see them all.
"""

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "crosscheck.py"


def load_crosscheck():
    spec = importlib.util.spec_from_file_location("crosscheck", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_disagreement_with_google_and_protego_has_an_rfc_reason():
    crosscheck = load_crosscheck()
    # Google's binding parses the file on every call: 20 URLs per file keep this fast.
    found = list(crosscheck.disagreements(urls_per_file=20))
    unexplained = [d for d in found if d.reason is None]
    assert not unexplained, "\n".join(map(str, unexplained[:20]))


def test_group_split_emulation_is_faithful():
    crosscheck = load_crosscheck()
    text = "User-agent: a\nCrawl-delay: 5\nUser-agent: b\nDisallow: /x\n"
    assert not crosscheck.RobotsTxt.parse(text).allowed("/x", "a")
    assert crosscheck.split_groups_at_other_records(text).allowed("/x", "a")
