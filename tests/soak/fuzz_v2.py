"""The fuzzer's DIDComm v2 layer (tests/soak/fuzz.py): well-formed v2 messages to the
mediator's DID taken apart and mutated at every layer — the JWE's protected header (alg,
enc, epk with wrong curves, off-curve and low-order points, huge values, skid/apu/apv),
its recipients and encrypted keys, the ciphertext, iv and tag; JWS signatures and payloads;
and plaintexts authcrypted by a mediated v2 wallet (coordinate-mediation, pickup, forward
with bad attachments and `next`, unknown types), so that the handlers see what a hostile
peer can make them see."""

from __future__ import annotations

import base64
import random
import uuid
from typing import Any

import httpx
import orjson

from mediator.didcomm.keys import ED25519_MULTICODEC, X25519_MULTICODEC, KeyPair, b58encode
from mediator.didcomm.v2 import content, jwe, jws
from mediator.didcomm.v2.dids import resolve
from mediator.didcomm.v2.jwk import PrivateKey
from mediator.didcomm.v2.unpack import pack
from tests.soak.fuzz_inputs import b64, dumps, hostile, mutate_bytes, mutate_json

ORG = "https://didcomm.org/"
ENCRYPTED = {"content-type": "application/didcomm-encrypted+json"}
# Points no honest sender writes: the identity and a small-order X25519 point, a P-256
# point off the curve, and keys of the wrong length.
BAD_EPKS = (
    {"kty": "OKP", "crv": "X25519", "x": b64(bytes(32))},
    {"kty": "OKP", "crv": "X25519", "x": b64(bytes([1]) + bytes(31))},
    {"kty": "OKP", "crv": "X25519", "x": b64(bytes(31))},
    {"kty": "EC", "crv": "P-256", "x": b64(bytes(32)), "y": b64(bytes([1]) * 32)},
    {"kty": "EC", "crv": "P-384", "x": b64(bytes(48)), "y": b64(bytes(48))},
    {"kty": "EC", "crv": "secp256k1", "x": b64(bytes(32)), "y": b64(bytes(32))},
    {"kty": "OKP", "crv": "Ed25519", "x": b64(bytes(32))},
)
TYPES = (
    "coordinate-mediation/2.0/mediate-request",
    "coordinate-mediation/2.0/keylist-update",
    "coordinate-mediation/3.0/recipient-query",
    "messagepickup/3.0/status-request",
    "messagepickup/3.0/delivery-request",
    "message-pickup/4.0/messages-received",
    "message-pickup/4.0/live-delivery-change",
    "routing/2.0/forward",
    "trust-ping/2.0/ping",
    "discover-features/2.0/queries",
    "report-problem/2.0/problem-report",
    "empty/1.0/empty",
    "nonexistent/9.0/thing",
)


class WalletKeys:
    """A v2 wallet's did:peer:2 and its keys (the fuzzer's authcrypting sender)."""

    def __init__(self, keys: KeyPair | None = None) -> None:
        self.keys = keys or KeyPair.from_seed(uuid.uuid4().bytes * 2)
        x = "z" + b58encode(X25519_MULTICODEC + self.keys.x25519_public)
        ed = "z" + b58encode(ED25519_MULTICODEC + self.keys.verkey)
        self.did = f"did:peer:2.E{x}.V{ed}"
        self.agreement = PrivateKey.from_x25519_bytes(self.keys.x25519_secret)


class V2Mutator:
    """Mutated v2 input for the mediator whose DID is `mediator`, from `wallet` (mediated
    and registered, so its authcrypted plaintexts reach the handlers)."""

    def __init__(self, rng: random.Random, mediator: str, wallet: WalletKeys) -> None:
        self.rng = rng
        self.mediator = mediator
        self.wallet = wallet
        key = resolve(mediator).agreement[0]
        assert key.agreement is not None
        self.to = [(f"{mediator}#key-1", key.agreement)]

    def _message(self) -> dict[str, Any]:
        rng = self.rng
        name = rng.choice(TYPES)
        body: dict[str, Any] = {
            "updates": [{"recipient_did": self.wallet.did, "action": "add"}],
            "limit": 5,
            "message_count_limit": 5,
            "message_id_list": ["1-0"],
            "live_delivery": True,
            "recipient_did": self.wallet.did,
            "next": self.wallet.did,
            "queries": [{"feature-type": "protocol", "match": "*"}],
        }
        message = {"id": uuid.uuid4().hex, "type": ORG + name, "from": self.wallet.did,
                   "to": [self.mediator], "body": body, "return_route": "all",
                   "attachments": [{"id": "a", "data": {"json": {"ciphertext": "x"}}}]}  # fmt: skip
        return message

    def _authcrypt(self, message: Any) -> dict[str, Any]:
        sender = (f"{self.wallet.did}#key-1", self.wallet.agreement)
        return jwe.encrypt(dumps(message), self.to, sender=sender)

    def __call__(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(6)
        if kind == 0:  # a plaintext the handlers read, mutated, from the wallet
            message = mutate_json(rng, self._message(), rng.choice([1, 2, 3]), big=False)
            if isinstance(message, dict):
                message["from"] = self.wallet.did
            return dumps(self._authcrypt(message))
        if kind == 1:  # an anoncrypted forward with a mutated body or attachments
            message = self._message()
            message["type"] = ORG + "routing/2.0/forward"
            message.pop("from")
            message = mutate_json(rng, message, rng.choice([1, 2]), big=False)
            enc = rng.choice(list(content.ALGORITHMS))
            return dumps(jwe.encrypt(dumps(message), self.to, enc=enc))
        sealed = self._authcrypt(self._message())
        if kind == 2:  # the protected header
            header = orjson.loads(base64.urlsafe_b64decode(sealed["protected"] + "=="))
            if rng.random() < 0.5:
                header["epk"] = rng.choice(BAD_EPKS)
            else:
                header = mutate_json(rng, header, rng.choice([1, 2]))
                if rng.random() < 0.3 and isinstance(header, dict):
                    header["alg"] = rng.choice(["ECDH-ES+A256KW", "ECDH-1PU+A256KW", "ECDH-X"])
            sealed["protected"] = b64(dumps(header))
            return dumps(sealed)
        if kind == 3:  # recipients, encrypted keys, the ciphertext and its iv and tag
            name = rng.choice(["recipients", "iv", "tag", "ciphertext"])
            if name == "recipients":
                sealed["recipients"] = mutate_json(rng, sealed["recipients"])
            elif rng.random() < 0.3:
                sealed[name] = hostile(rng)
            else:
                raw = base64.urlsafe_b64decode(str(sealed[name]) + "==")
                sealed[name] = b64(mutate_bytes(rng, raw))
            return dumps(sealed)
        if kind == 4:  # a signed message, mutated
            signing = jws.sign(dumps(self._message()), f"{self.wallet.did}#key-2",
                               _signer(self.wallet))  # fmt: skip
            return dumps(mutate_json(rng, signing, rng.choice([1, 2])))
        return dumps(mutate_json(rng, sealed, rng.choice([1, 2, 3])))


def _signer(wallet: WalletKeys) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return ed25519.Ed25519PrivateKey.from_private_bytes(wallet.keys.sigkey[:32])


async def mediated_wallet(base: str) -> tuple[str, WalletKeys]:
    """The mediator's DID at `base`, and a v2 wallet granted mediation there with its DID
    registered."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        mediator = (await client.get("/v2/invitation")).json()["did"]
        wallet = WalletKeys()
        sender = (f"{wallet.did}#key-1", wallet.agreement)
        update = {"updates": [{"recipient_did": wallet.did, "action": "add"}]}
        for name, body in (("mediate-request", {}), ("keylist-update", update)):
            message = {"id": uuid.uuid4().hex, "type": f"{ORG}coordinate-mediation/2.0/{name}",
                       "from": wallet.did, "to": [mediator], "body": body,
                       "return_route": "all"}  # fmt: skip
            sealed = pack(message, mediator, sender=sender)
            answer = await client.post("/", content=orjson.dumps(sealed), headers=ENCRYPTED)
            answer.raise_for_status()
    return mediator, wallet
