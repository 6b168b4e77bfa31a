"""A spider for a real public practice site, https://books.toscrape.com/ (it needs
network access): titles and prices of the first pages of the catalogue, with
scrapy_rfc9309's robots.txt handling, budget and Crawl-delay throttle in force."""

import scrapy


class BooksSpider(scrapy.Spider):
    name = "books"
    allowed_domains = ["books.toscrape.com"]
    start_urls = ["https://books.toscrape.com/"]
    custom_settings = {
        "CLOSESPIDER_PAGECOUNT": 20,
        "DOWNLOAD_DELAY": 1.0,
        # A real site: keep the budget across runs (SQLite in .scrapy/, the default).
        "DOMAINBUDGET_STORAGE": "scrapy_rfc9309.budget.storage.SQLiteStorage",
    }

    def parse(self, response):
        for book in response.css("article.product_pod"):
            yield {
                "title": book.css("h3 a::attr(title)").get(),
                "price": book.css("p.price_color::text").get(),
            }
        next_page = response.css("li.next a::attr(href)").get()
        if next_page:
            yield response.follow(next_page)
