"""The mediator's Out-of-Band 1.1 invitation (RFC 0434): one service entry (ACA-Py refuses
more), the mediator's key as did:key, and its public HTTP endpoint."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from mediator.didcomm.keys import KeyPair

OOB_TYPE = "https://didcomm.org/out-of-band/1.1/invitation"


def invitation(identity: KeyPair, endpoint: str, label: str) -> dict[str, Any]:
    # The id is derived from the key, so every node hands out the same invitation.
    oob_id = str(uuid.uuid5(uuid.NAMESPACE_URL, identity.did_key))
    return {
        "@type": OOB_TYPE,
        "@id": oob_id,
        "label": label,
        "accept": ["didcomm/aip1", "didcomm/aip2;env=rfc19"],
        "services": [
            {
                "id": "#inline",
                "type": "did-communication",
                "recipientKeys": [identity.did_key],
                "routingKeys": [],
                "serviceEndpoint": endpoint,
            }
        ],
    }


def invitation_url(endpoint: str, oob: dict[str, Any]) -> str:
    encoded = base64.urlsafe_b64encode(json.dumps(oob, separators=(",", ":")).encode())
    return f"{endpoint}?oob={encoded.decode().rstrip('=')}"
