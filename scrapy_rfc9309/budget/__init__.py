"""Per-domain daily budgets: pure policy and storages (no Scrapy imports)."""
