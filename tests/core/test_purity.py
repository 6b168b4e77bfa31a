"""The core is pure Python: importing it pulls in neither Scrapy nor Twisted."""

import subprocess
import sys


def test_core_imports_no_scrapy_or_twisted():
    code = (
        "import sys\n"
        "from scrapy_rfc9309 import RobotsTxt\n"
        "import scrapy_rfc9309.robots, scrapy_rfc9309.budget\n"
        "RobotsTxt.parse(b'User-agent: *\\nDisallow: /').check('/x', 'bot')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_public_name_imports():
    import scrapy_rfc9309

    for name in scrapy_rfc9309.__all__:
        assert getattr(scrapy_rfc9309, name) is not None, name
