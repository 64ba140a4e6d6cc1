"""The mqs message routes, taken before Starlette's router and exception layers.

Sending, receiving and deleting messages are nearly all of the API's traffic, and a request
through the router costs a route match over every route and two more exception layers (a
quarter of a receive's node CPU). This middleware answers the three message routes itself,
with the same handlers; everything else (queues, HEAD, a name with a '/', a path under a
root path) goes on to the router, whose answers are unchanged.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from mediator.mqs.routes import Handler, delete_message, receive_messages, send_messages

PREFIX = "/messages/"
_HANDLERS: dict[str, tuple[Handler, str]] = {
    "POST": (send_messages, "name"),
    "GET": (receive_messages, "name"),
    "DELETE": (delete_message, "message_id"),
}


class MessageRoutes:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            route = _HANDLERS.get(scope["method"])
            if route is not None and path.startswith(PREFIX):
                name = path[len(PREFIX) :]
                if name and "/" not in name:
                    handler, param = route
                    scope["path_params"] = {param: name}
                    response = await handler(Request(scope, receive, send))
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
