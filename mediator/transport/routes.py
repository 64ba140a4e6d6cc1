"""The DIDComm routes: `POST /`, the WebSocket at `/`, and `GET /invitation`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from mediator.didcomm.invitation import invitation, invitation_url
from mediator.transport.http import post_only
from mediator.transport.inbound import Pipeline
from mediator.transport.websocket import didcomm_websocket


async def get_invitation(request: Request) -> Response:
    pipeline: Pipeline = request.app.state.didcomm
    settings = pipeline.services.settings
    oob = invitation(pipeline.services.identity, settings.public_endpoint, settings.label)
    return JSONResponse(
        {"invitation_url": invitation_url(settings.public_endpoint, oob), "invitation": oob}
    )


routes: list[BaseRoute] = [
    Route("/", post_only, methods=["POST"]),
    WebSocketRoute("/", didcomm_websocket),
    Route("/invitation", get_invitation, methods=["GET"]),
]
