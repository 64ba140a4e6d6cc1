"""The DIDComm routes: `POST /`, `GET /invitation`, `GET /v2/invitation`, `GET
/v2/did/{did}` (our DIDs resolved: the short did:peer:4 needs it) and, with
MEDIATOR_DID_WEB, `GET /.well-known/did.json` (the WebSocket at `/` is
`websocket.DidcommSocket`, a middleware)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mediator.didcomm.keys import KeyPair
from mediator.didcomm.v2 import invitation as invitation_v2
from mediator.didcomm.v2.identity import mediator_v2, web_did
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
    node), with its `_oob=` URL and the DID: from the did:peer:2, or with `?did=peer4` from
    the long-form did:peer:4 of the same document."""
    services = request.app.state.didcomm.services
    form = request.query_params.get("did", "peer2")
    if form not in DID_FORMS:
        return JSONResponse(
            {"error": f"did must be one of {', '.join(DID_FORMS)}", "code": "bad-request"}, 400
        )
    return JSONResponse(
        v2_invitation(services.identity, services.endpoints, services.didcomm, form)
    )


DID_FORMS = ("peer2", "peer4")


def v2_invitation(
    identity: KeyPair, endpoints: tuple[str, ...], settings: DidcommSettings, form: str = "peer2"
) -> dict[str, Any]:
    mediator = mediator_v2(identity, endpoints, settings.v2_nist_keys)
    did = mediator.peer4 if form == "peer4" else mediator.did
    message = invitation_v2.invitation(did, settings.label)
    return {
        "invitation_url": invitation_v2.invitation_url(endpoints[0], message),
        "invitation": message,
        "did": did,
        "dids": list(mediator.dids(settings.did_web)),
    }


async def get_did_web(request: Request) -> Response:
    """did:web's document of the mediator's v2 identity (MEDIATOR_DID_WEB), or 404."""
    services = request.app.state.didcomm.services
    host = services.didcomm.did_web
    if not host:
        return JSONResponse({"error": "no did:web is served here", "code": "not-found"}, 404)
    document = services.v2.web_document(host)
    return JSONResponse(document, media_type="application/did+json")


async def get_our_did(request: Request) -> Response:
    """The document of one of our v2 DIDs (a did:peer:4 in either form, the did:peer:2, the
    did:web), or 404: a peer handed the short did:peer:4 resolves it here."""
    services = request.app.state.didcomm.services
    mediator = services.v2
    did = request.path_params["did"]
    if did == mediator.peer4 or did == mediator.peer4_short:
        document = mediator.peer4_document(short=did == mediator.peer4_short)
    elif did == mediator.did:
        document = mediator.document(did)
    elif services.didcomm.did_web and did == web_did(services.didcomm.did_web):
        document = mediator.web_document(services.didcomm.did_web)
    else:
        return JSONResponse({"error": "not a DID of this mediator", "code": "not-found"}, 404)
    return JSONResponse(document, media_type="application/did+json")


routes: list[BaseRoute] = [
    Route("/", post_only, methods=["POST"]),
    Route("/invitation", get_invitation, methods=["GET"]),
    Route("/v2/invitation", get_v2_invitation, methods=["GET"]),
    Route("/v2/did/{did:path}", get_our_did, methods=["GET"]),
    Route("/.well-known/did.json", get_did_web, methods=["GET"]),
]
