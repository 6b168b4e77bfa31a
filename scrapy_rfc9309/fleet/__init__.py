"""Politeness shared by a fleet of crawler processes through one Redis (pure asyncio)."""
