"""Refuse requests addressed to a host name the server does not answer to (DNS rebinding): a page
on evil.example that rebinds its name to this server's address would otherwise drive it, as its
admin on a loopback server without sign-in, WebSocket included.

Streamlit has no setting for this, so the app Streamlit serves carries an ASGI middleware in
front of all of Streamlit's own routes (ui.entry puts it there, in every start mode); the rule
itself (core.exposure.HostRule) is pure.
"""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from core.exposure import HostRule

REFUSED = "This server does not answer to that host name; open it at the address you were given."
WEBSOCKET_POLICY = 1008  # "policy violation"; closed before accepting, uvicorn answers 403


class HostCheck:
    """ASGI middleware: HTTP requests and WebSocket upgrades whose Host header `rule` does not
    allow get 403 and never reach Streamlit; lifespan events pass through."""

    def __init__(self, app: ASGIApp, *, rule: HostRule) -> None:
        self.app, self.rule = app, rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self.rule.allows(_host(scope)):
            refusal = (
                PlainTextResponse(REFUSED, status_code=403)
                if scope["type"] == "http"
                else WebSocketClose(code=WEBSOCKET_POLICY)
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _host(scope: Scope) -> str | None:
    """The request's one Host header, or None when it has none or several (ambiguous)."""
    hosts = [value for name, value in scope["headers"] if name.lower() == b"host"]
    return hosts[0].decode("latin-1") if len(hosts) == 1 else None


def host_check(rule: HostRule) -> Middleware:
    """The HostCheck for `rule`, as st.App(middleware=...) takes it: outermost of the app's
    middleware, so a refused request reaches none of Streamlit's."""
    return Middleware(HostCheck, rule=rule)
