"""Each reach into Scrapy's private parts, broken on purpose as a Scrapy release could
break it: the crawl stops before any request, with a message naming the part and the
Scrapy version (see scrapy_rfc9309/extensions/_slots.py)."""

import logging
import re

import pytest
import pytest_twisted
import scrapy
from scrapy.core.downloader import Downloader

from scrapy_rfc9309._settings import SettingError
from tests.crawl import crawl

THROTTLE = {"CRAWLDELAY_ENABLED": True, "EXTENSIONS": {"scrapy_rfc9309.CrawlDelayThrottle": 500}}


def urls(site):
    site.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.2\n")
    return [f"{site.url}/p/{n}" for n in range(3)]


@pytest_twisted.ensureDeferred
async def test_a_downloader_that_no_longer_waits_for_the_delay_stops_the_crawl(site, monkeypatch):
    def process_queue(self, slot):  # a release that spaces by something else
        while slot.queue and slot.free_transfer_slots() > 0:
            slot.queue.popleft()

    monkeypatch.setattr(Downloader, "_process_queue", process_queue)
    changed = re.escape(f"Scrapy {scrapy.__version__} changed Downloader._process_queue")
    with pytest.raises(SettingError, match=changed):
        await crawl(urls(site), **THROTTLE)
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_a_downloader_that_starts_without_asking_the_slot_stops_the_crawl(site, monkeypatch):
    original = Downloader._process_queue

    def process_queue(self, slot):
        if slot.latercall or slot.lastseen + slot.download_delay() > 1e6:
            return original(self, slot)
        slot.queue.clear()  # started without free_transfer_slots()
        return None

    monkeypatch.setattr(Downloader, "_process_queue", process_queue)
    with pytest.raises(SettingError, match=re.escape("changed Slot.free_transfer_slots")):
        await crawl(urls(site), **THROTTLE)
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_a_downloader_that_no_longer_counts_its_requests_stops_the_crawl(
    site, monkeypatch, caplog
):
    monkeypatch.setattr(Downloader, "needs_backout", lambda self: False)
    with caplog.at_level(logging.ERROR):
        crawler = await crawl(urls(site), **THROTTLE)
    assert f"Scrapy {scrapy.__version__} changed Downloader.needs_backout" in caplog.text
    assert crawler.stats.get_value("finish_reason") == "crawldelay_seam_changed"
    assert site.paths() == []


@pytest_twisted.ensureDeferred
async def test_a_downloader_whose_active_requests_are_no_set_stops_the_crawl(
    site, monkeypatch, caplog
):
    init = Downloader.__init__

    def renamed(self, crawler):
        init(self, crawler)
        self.active = list(self.active)

    monkeypatch.setattr(Downloader, "__init__", renamed)
    with caplog.at_level(logging.ERROR):
        crawler = await crawl(urls(site), **THROTTLE)
    assert "changed Downloader.active" in caplog.text
    assert crawler.stats.get_value("finish_reason") == "crawldelay_seam_changed"
    assert site.paths() == []
