"""The DIDComm routes: `POST /` and `GET /invitation` (the WebSocket at `/` is
`websocket.DidcommSocket`, a middleware)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mediator.transport.http import post_only


async def get_invitation(request: Request) -> Response:
    """The Out-of-Band invitation (and its legacy `?c_i=` form): the one imported from the
    mediator this one replaced, else the multi-use one, or a new single-use one per request
    when invitations are single-use."""
    services = request.app.state.didcomm.services
    answer = await services.handshakes.invitation(
        services.identity, services.didcomm, services.endpoints[0], services.imported
    )
    return JSONResponse(answer, headers={"Cache-Control": "no-store"})


routes: list[BaseRoute] = [
    Route("/", post_only, methods=["POST"]),
    Route("/invitation", get_invitation, methods=["GET"]),
]
