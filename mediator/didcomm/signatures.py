"""The two signature formats of the handshakes, both Ed25519.

- Signed attachments (RFC 0017), as DID Exchange signs `did_doc~attach` and
  `did_rotate~attach`: a JWS (EdDSA) over the attachment's base64url payload. The signer's
  key is named by `kid` (a did:key) or by a `jwk` in the protected header.
- `connection~sig` (connections 1.0, RFC 0160): `sig_data` is an 8-byte big-endian timestamp
  followed by the signed JSON, and `signer` the base58 verkey.
"""

from __future__ import annotations

import json
import struct
import time
from typing import Any

import nacl.exceptions
import nacl.signing

from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.didcomm.keys import KeyPair, b58decode, b58encode, normalize_key
from mediator.errors import DidError, EnvelopeError, InvalidKey

SIGNATURE_TYPE = "https://didcomm.org/signature/1.0/ed25519Sha512_single"


def _verify(verkey_b58: str, message: bytes, signature: bytes) -> None:
    try:
        nacl.signing.VerifyKey(b58decode(verkey_b58)).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError) as exc:
        raise DidError("the signature does not verify") from exc


def sign_attachment(payload: bytes, keys: KeyPair) -> dict[str, Any]:
    """A `data` object carrying `payload` and its JWS by `keys`. The protected header holds
    the `jwk` and the unprotected one the `kid` (Credo refuses both in one header)."""
    encoded = b64url_encode(payload)
    protected = {
        "alg": "EdDSA",
        "jwk": {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(keys.verkey)},
    }
    protected_b64 = b64url_encode(json.dumps(protected, separators=(",", ":")).encode())
    signing = nacl.signing.SigningKey(keys.sigkey[:32])
    signature = signing.sign(f"{protected_b64}.{encoded}".encode()).signature
    return {
        "base64": encoded,
        "jws": {
            "header": {"kid": keys.did_key},
            "protected": protected_b64,
            "signature": b64url_encode(signature),
        },
    }


def _jws_signer(header: Any, protected: dict[str, Any]) -> str:
    kid = None
    if isinstance(header, dict) and isinstance(header.get("kid"), str):
        kid = header["kid"]
    elif isinstance(protected.get("kid"), str):
        kid = protected["kid"]
    try:
        if kid is not None and kid.startswith("did:key:"):
            return normalize_key(kid.split("#", 1)[0])
        jwk = protected.get("jwk")
        if isinstance(jwk, dict) and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            return normalize_key(b58encode(b64url_decode(jwk.get("x"), "jwk.x")))
    except (InvalidKey, EnvelopeError) as exc:
        raise DidError(f"the JWS names no usable key: {exc}") from exc
    raise DidError("the JWS names no Ed25519 key (a did:key kid or an OKP jwk)")


def verify_attachment(data: Any) -> tuple[bytes, set[str]]:
    """The payload of a signed attachment's `data`, and the keys whose signatures verified.
    An unsigned attachment gives an empty set; a signature that fails raises DidError."""
    if not isinstance(data, dict):
        raise DidError("an attachment needs a data object")
    try:
        payload = b64url_decode(data.get("base64"), "data.base64")
    except EnvelopeError as exc:
        raise DidError(str(exc)) from exc
    jws = data.get("jws")
    if jws is None:
        return payload, set()
    if not isinstance(jws, dict):
        raise DidError("data.jws must be an object")
    entries = jws.get("signatures", [jws])
    if not isinstance(entries, list) or not entries or len(entries) > 8:
        raise DidError("data.jws.signatures must list 1 to 8 signatures")
    encoded = b64url_encode(payload)
    signers = set()
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("protected"), str):
            raise DidError("a JWS needs a protected header")
        try:
            protected = json.loads(b64url_decode(entry["protected"], "jws.protected"))
            signature = b64url_decode(entry.get("signature"), "jws.signature")
        except (EnvelopeError, ValueError, RecursionError) as exc:
            raise DidError(f"the JWS is malformed: {type(exc).__name__} {exc}"[:300]) from exc
        if not isinstance(protected, dict) or protected.get("alg") != "EdDSA":
            raise DidError("the JWS must be EdDSA")
        signer = _jws_signer(entry.get("header"), protected)
        _verify(signer, f"{entry['protected']}.{encoded}".encode(), signature)
        signers.add(signer)
    return payload, signers


def sign_connection(
    data: dict[str, Any], keys: KeyPair, *, now: float | None = None
) -> dict[str, Any]:
    """`connection~sig` over `data` (seconds since the epoch, as RFC 0160 says)."""
    stamp = int(time.time() if now is None else now)
    sig_data = struct.pack(">Q", stamp) + json.dumps(data, separators=(",", ":")).encode()
    signature = nacl.signing.SigningKey(keys.sigkey[:32]).sign(sig_data).signature
    return {
        "@type": SIGNATURE_TYPE,
        "signature": b64url_encode(signature),
        "sig_data": b64url_encode(sig_data),
        "signer": keys.verkey_b58,
    }


def verify_connection(sig: Any) -> tuple[dict[str, Any], str]:
    """The signed connection JSON of a `connection~sig`, and its signer's verkey."""
    if not isinstance(sig, dict):
        raise DidError("connection~sig must be an object")
    try:
        signer = normalize_key(sig.get("signer"))
        sig_data = b64url_decode(sig.get("sig_data"), "sig_data")
        signature = b64url_decode(sig.get("signature"), "signature")
    except (InvalidKey, EnvelopeError) as exc:
        raise DidError(f"connection~sig is malformed: {exc}") from exc
    if len(sig_data) <= 8:
        raise DidError("connection~sig carries no data")
    _verify(signer, sig_data, signature)
    try:
        data = json.loads(sig_data[8:])
    except (ValueError, RecursionError) as exc:
        raise DidError("the signed connection is not JSON") from exc
    if not isinstance(data, dict):
        raise DidError("the signed connection must be a JSON object")
    return data, signer
