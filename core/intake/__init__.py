"""The intake API: complaints pushed by the bank's systems, routed by the live model as they
arrive, stored in the inbox of the review store (core.intake.inbox), behind tokens
(core.intake.tokens)."""
