"""The wheel a user installs: built from the checkout as `make wheel` builds it, then
installed into a fresh virtualenv that has only the package's dependencies."""

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_installs_and_its_commands_and_components_load(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("scrapy_rfc9309-*.whl")

    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=False)
    python = fresh / "bin" / "python"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # The dependencies come from this environment's site-packages, added as a plain
    # path: its .pth files (this checkout's editable install) are not read.
    site = Path(sysconfig.get_paths()["purelib"])
    fresh_site = next(fresh.glob("lib/python*/site-packages"))
    (fresh_site / "dependencies.pth").write_text(f"{site}\n")

    check = subprocess.run(
        [
            str(python),
            "-c",
            "import scrapy_rfc9309, importlib.resources as r;"
            "from scrapy_rfc9309 import Addon, RobotParser, RobotsTxtMiddleware;"
            "from scrapy_rfc9309.budget.storage import SQLiteStorage;"
            "from scrapy_rfc9309.fleet.script import SOURCE;"  # the Lua file is in it
            "assert 'function calls.pop' in SOURCE;"
            "print(scrapy_rfc9309.__file__);"
            "print(r.files('scrapy_rfc9309').joinpath('py.typed').is_file())",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
    location, typed = check.stdout.split()
    assert Path(location).is_relative_to(fresh), "imported from the wheel, not the checkout"
    assert typed == "True"

    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private\n")
    command = subprocess.run(
        [
            str(python),
            "-m",
            "scrapy",
            "robots",
            "https://example.com/private/x",
            "--file",
            str(robots),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert command.returncode == 1, command.stdout + command.stderr  # the entry point works
    assert "Disallow: /private" in command.stdout
