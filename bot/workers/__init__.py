"""Background work: the job outbox's worker and the expiry sweep."""
