"""Background upkeep processes: retention purge, delayed promotion, index cleaning."""
