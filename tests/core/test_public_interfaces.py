"""The package reaches into no private part of Scrapy or Twisted: what Scrapy
documents only (settings, signals, middleware and priority-queue interfaces,
add-ons).  A reach found here is a defect, not a style point: the next Scrapy
release may move it, and the crawl then breaks or, worse, silently stops being
polite."""

from __future__ import annotations

import ast
from pathlib import Path

import scrapy_rfc9309

PACKAGE = Path(scrapy_rfc9309.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))
FOREIGN = ("scrapy", "twisted")
#: Attributes of Scrapy's engine and downloader that are their internal state.
INTERNAL_STATE = {"downloader", "slots", "scraper", "active", "nextcall", "needs_backout"}


def trees(sources):
    for path in sources:
        yield path, ast.parse(path.read_text(), str(path))


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def own_private_names() -> set[str]:
    """Every underscored name this package defines: its own attributes and helpers."""
    names: set[str] = set()
    for _, tree in trees(SOURCES):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {name for name in names if private(name)}


def reaches(sources) -> list[str]:
    own = own_private_names()
    found = []
    for path, tree in trees(sources):
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] in FOREIGN:
                    parts = node.module.split(".")
                    names = [alias.name for alias in node.names]
                    if any(map(private, parts + names)):
                        found.append(f"{where}: from {node.module} import {', '.join(names)}")
                    if node.module == "twisted.internet" and "reactor" in names:
                        found.append(f"{where}: imports the Twisted reactor")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] in FOREIGN and any(map(private, parts)):
                        found.append(f"{where}: import {alias.name}")
            elif isinstance(node, ast.Attribute):
                if private(node.attr) and node.attr not in own:
                    found.append(f"{where}: .{node.attr}")
                if node.attr in INTERNAL_STATE:
                    found.append(f"{where}: .{node.attr} (Scrapy's internal state)")
                if node.attr == "__class__" and isinstance(node.ctx, ast.Store):
                    found.append(f"{where}: assigns __class__")
    return found


def test_no_private_reach_into_scrapy_or_twisted():
    assert reaches(SOURCES) == []


def test_the_check_finds_a_reach(tmp_path):
    """The check itself can fail: the reaches the throttle once made are found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from scrapy.pqueues import _path_safe\n"
        "from twisted.internet import reactor\n"
        "def f(crawler, slot, cls):\n"
        "    crawler.engine._slot.nextcall.schedule()\n"
        "    slot.__class__ = cls\n"
        "    crawler.engine.downloader.needs_backout()\n"
        "    crawler.engine.needs_backout()\n"
        "    return crawler.engine.downloader.slots\n"
    )
    found = reaches([sample])
    assert any("_path_safe" in reach for reach in found)
    assert any("Twisted reactor" in reach for reach in found)
    assert any("._slot" in reach for reach in found)
    assert any("__class__" in reach for reach in found)
    assert any(".slots" in reach for reach in found)
    assert sum(".downloader" in reach for reach in found) == 2
    assert sum(".needs_backout" in reach for reach in found) == 2
