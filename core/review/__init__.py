"""Human review: the SQLite store (decisions, triage queue, append-only trail) and the triage and
relabelling logic on top of it."""
