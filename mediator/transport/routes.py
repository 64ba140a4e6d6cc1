"""The DIDComm routes: `POST /`, `GET /invitation`, `GET /v2/invitation` and, with
MEDIATOR_DID_WEB, `GET /.well-known/did.json` (the WebSocket at `/` is
`websocket.DidcommSocket`, a middleware)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mediator.didcomm.keys import KeyPair
from mediator.didcomm.v2 import invitation as invitation_v2
from mediator.didcomm.v2.dids import MediatorV2
from mediator.settings import DidcommSettings
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


async def get_v2_invitation(request: Request) -> Response:
    """The Out-of-Band 2.0 invitation from the mediator's DIDComm v2 DID (the same on every
    node), with its `_oob=` URL and the DID."""
    services = request.app.state.didcomm.services
    return JSONResponse(v2_invitation(services.identity, services.endpoints, services.didcomm))


def v2_invitation(
    identity: KeyPair, endpoints: tuple[str, ...], settings: DidcommSettings
) -> dict[str, Any]:
    did = MediatorV2(identity, endpoints).did
    message = invitation_v2.invitation(did, settings.label)
    return {
        "invitation_url": invitation_v2.invitation_url(endpoints[0], message),
        "invitation": message,
        "did": did,
    }


async def get_did_web(request: Request) -> Response:
    """did:web's document of the mediator's v2 identity (MEDIATOR_DID_WEB), or 404."""
    services = request.app.state.didcomm.services
    host = services.didcomm.did_web
    if not host:
        return JSONResponse({"error": "no did:web is served here", "code": "not-found"}, 404)
    document = MediatorV2(services.identity, services.endpoints).web_document(host)
    return JSONResponse(document, media_type="application/did+json")


routes: list[BaseRoute] = [
    Route("/", post_only, methods=["POST"]),
    Route("/invitation", get_invitation, methods=["GET"]),
    Route("/v2/invitation", get_v2_invitation, methods=["GET"]),
    Route("/.well-known/did.json", get_did_web, methods=["GET"]),
]
