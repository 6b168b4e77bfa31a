"""Run one crawl in this process: ``python -m tests.crawl_process [--dedupe] SETTINGS_JSON
URL...`` (``--dedupe``: requests go through the dupefilter, as in a fleet).

Used by tests that need a crawler they can kill, several crawler processes, or the
peak memory of one crawl.  The last line printed is the crawl's stats as JSON."""

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess


class Pages(scrapy.Spider):
    name = "pages"

    async def start(self):
        for url in self.urls:
            yield scrapy.Request(url, dont_filter=not self.dedupe)

    def parse(self, response):
        pass


def main() -> None:
    args = sys.argv[1:]
    dedupe = args[0] == "--dedupe"
    settings, *urls = args[dedupe:]
    process = CrawlerProcess(
        {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, **json.loads(settings)}
    )
    crawler = process.create_crawler(Pages)
    process.crawl(crawler, urls=urls, dedupe=dedupe)
    process.start()
    print(json.dumps(crawler.stats.get_stats(), default=str))


if __name__ == "__main__":
    main()
