"""Altair chart builders and the pandas tables that only exist to be shown; pages render them."""
