"""Settings of the demo project: scrapy_rfc9309 enabled the one-line way."""

from pathlib import Path

BOT_NAME = "demo"
SPIDER_MODULES = ["demo.spiders"]
NEWSPIDER_MODULE = "demo.spiders"

# The crawler's product token is "DemoBot": robots.txt groups naming it apply.
USER_AGENT = "DemoBot/1.0 (+http://127.0.0.1/about)"

ADDONS = {"scrapy_rfc9309.Addon": 500}
ROBOTSTXT_OBEY = True
DOMAINBUDGET_ENABLED = True
DOMAINBUDGET_POLICY_FILE = str(Path(__file__).resolve().parent.parent / "config" / "domains.yaml")
# The demo starts every run with a fresh budget.  A real project keeps the default,
# SQLite in .scrapy/ (the budget survives restarts), or Redis for many processes.
DOMAINBUDGET_STORAGE = "scrapy_rfc9309.budget.storage.MemoryStorage"

CONCURRENT_REQUESTS = 8
DOWNLOAD_DELAY = 0.1  # robots.txt asks DemoBot for 0.5 s: the larger one applies
RFC9309_TIMEOUT = 5
LOG_LEVEL = "INFO"
TELNETCONSOLE_ENABLED = False
