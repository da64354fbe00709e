"""Who is using this browser session: the signed-in actor (core.access.Actor)."""

from __future__ import annotations

from core.access import LOCAL_USER, Actor


def current_actor() -> Actor:
    """Without sign-in the server is on loopback and its one user is admin."""
    return LOCAL_USER
