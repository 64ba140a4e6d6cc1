"""The mediator's invitations: Out-of-Band 1.1 (RFC 0434) offering DID Exchange 1.1 and 1.0
and connections 1.0, with one service entry (ACA-Py refuses more), and the same offer as a
legacy connections 1.0 invitation (`?c_i=`) for agents that predate Out-of-Band.

The multi-use invitation is the cluster's identity key; its id is derived from the key, so
every node hands out the same one. A single-use invitation has a key of its own.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from mediator.didcomm.keys import KeyPair

OOB_TYPE = "https://didcomm.org/out-of-band/1.1/invitation"
LEGACY_TYPE = "https://didcomm.org/connections/1.0/invitation"
HANDSHAKE_PROTOCOLS = [
    "https://didcomm.org/didexchange/1.1",
    "https://didcomm.org/didexchange/1.0",
    "https://didcomm.org/connections/1.0",
]
ACCEPT = ["didcomm/aip1", "didcomm/aip2;env=rfc19"]


def multi_use_id(identity: KeyPair) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, identity.did_key))


def invitation(keys: KeyPair, endpoint: str, label: str, oob_id: str) -> dict[str, Any]:
    return {
        "@type": OOB_TYPE,
        "@id": oob_id,
        "label": label,
        "accept": ACCEPT,
        "handshake_protocols": HANDSHAKE_PROTOCOLS,
        "services": [
            {
                "id": "#inline",
                "type": "did-communication",
                "recipientKeys": [keys.did_key],
                "routingKeys": [],
                "serviceEndpoint": endpoint,
            }
        ],
    }


def legacy_invitation(keys: KeyPair, endpoint: str, label: str, oob_id: str) -> dict[str, Any]:
    return {
        "@type": LEGACY_TYPE,
        "@id": oob_id,
        "label": label,
        "recipientKeys": [keys.verkey_b58],
        "routingKeys": [],
        "serviceEndpoint": endpoint,
    }


def _encoded(message: dict[str, Any]) -> str:
    raw = json.dumps(message, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def invitation_url(endpoint: str, oob: dict[str, Any]) -> str:
    return f"{endpoint}?oob={_encoded(oob)}"


def legacy_invitation_url(endpoint: str, legacy: dict[str, Any]) -> str:
    return f"{endpoint}?c_i={_encoded(legacy)}"


def invitation_urls(
    keys: KeyPair, endpoint: str, label: str, oob_id: str, *, multi_use: bool
) -> dict[str, Any]:
    """What `GET /invitation` answers: both URLs and the Out-of-Band invitation itself."""
    oob = invitation(keys, endpoint, label, oob_id)
    legacy = legacy_invitation(keys, endpoint, label, oob_id)
    return {
        "invitation_url": invitation_url(endpoint, oob),
        "legacy_invitation_url": legacy_invitation_url(endpoint, legacy),
        "invitation": oob,
        "multi_use": multi_use,
    }
