"""The mediator's Out-of-Band 2.0 invitation: a plaintext message `from` its v2 DID, with
the goal of mediation, as JSON (`GET /v2/invitation`) and as a URL with `_oob=` (its
compact JSON in base64url, as DIDComm Messaging 2.1 §Standard Message Encoding says).

Every node writes the same invitation for the same DID: its `id` is derived from the DID,
so a wallet that scans it twice sees one invitation (and the `pthid` of what it sends
next names it, whichever node answers).
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from mediator.didcomm.envelope import b64url_encode
from mediator.didcomm.v2.dids import DIDCOMM_V2

TYPE = "https://didcomm.org/out-of-band/2.0/invitation"
GOAL_CODE = "request-mediate"  # what wallets (Identus) look for in a mediator's invitation
GOAL = "RequestMediate"
_NAMESPACE = uuid.UUID("1b0e3d7a-6f43-4b43-9c27-6f6b0b9d5a61")  # this product's invitations


def invitation(did: str, label: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"goal_code": GOAL_CODE, "goal": GOAL, "accept": [DIDCOMM_V2]}
    if label:
        body["label"] = label
    return {"type": TYPE, "id": str(uuid.uuid5(_NAMESPACE, did)), "from": did, "body": body}


def invitation_url(base: str, message: dict[str, Any]) -> str:
    """`base` (the public endpoint) with the invitation in `_oob`."""
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}_oob={b64url_encode(orjson.dumps(message))}"
