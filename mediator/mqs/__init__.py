"""The mqs HTTP queue API on the queue engine."""
