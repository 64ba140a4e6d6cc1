"""DIDComm v2 signed messages: JWSs in General or Flattened JSON form (DIDComm Messaging
2.1 §Message Signing), and the compact JWTs of `from_prior`.

Verified: EdDSA (Ed25519), ES256 (P-256), ES384 (P-384) and ES256K (secp256k1), the
signature over `protected.payload` as JWS defines it (RFC 7515 §5.2), ECDSA signatures as
the raw `r || s` JWA writes. Signed: EdDSA. Every failure raises EnvelopeError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.errors import EnvelopeError

TYP = "application/didcomm-signed+json"
ECDSA: dict[str, tuple[str, ec.EllipticCurve, hashes.HashAlgorithm, int]] = {
    "ES256": ("P-256", ec.SECP256R1(), hashes.SHA256(), 32),
    "ES384": ("P-384", ec.SECP384R1(), hashes.SHA384(), 48),
    "ES256K": ("secp256k1", ec.SECP256K1(), hashes.SHA256(), 32),
}
ALGORITHMS = ("EdDSA", *ECDSA)
MAX_SIGNATURES = 16


@dataclass(frozen=True)
class VerifyingKey:
    """A public key that verifies signatures: its JWA algorithm and the key itself."""

    alg: str
    native: Any

    @classmethod
    def from_jwk(cls, jwk: Any, what: str = "key") -> VerifyingKey:
        if not isinstance(jwk, dict):
            raise EnvelopeError(f"{what} must be a JWK object")
        crv = jwk.get("crv")
        if jwk.get("kty") == "OKP" and crv == "Ed25519":
            x = b64url_decode(jwk.get("x"), f"{what} x")
            if len(x) != 32:
                raise EnvelopeError(f"{what}: an Ed25519 key is 32 bytes")
            return cls("EdDSA", ed25519.Ed25519PublicKey.from_public_bytes(x))
        for alg, (name, curve, _, size) in ECDSA.items():
            if jwk.get("kty") == "EC" and crv == name:
                x = b64url_decode(jwk.get("x"), f"{what} x")
                y = b64url_decode(jwk.get("y"), f"{what} y")
                if len(x) != size or len(y) != size:
                    raise EnvelopeError(f"{what}: a {name} coordinate is {size} bytes")
                try:
                    numbers = ec.EllipticCurvePublicNumbers(
                        int.from_bytes(x, "big"), int.from_bytes(y, "big"), curve
                    )
                    return cls(alg, numbers.public_key())
                except ValueError as exc:
                    raise EnvelopeError(f"{what}: the {name} point is not on its curve") from exc
        raise EnvelopeError(f"{what}: unsupported signing key {str(crv)[:20]!r}")

    @classmethod
    def ed25519(cls, public: bytes) -> VerifyingKey:
        return cls("EdDSA", ed25519.Ed25519PublicKey.from_public_bytes(public))

    def verify(self, alg: object, signature: bytes, signed: bytes) -> None:
        if alg != self.alg:
            raise EnvelopeError(f"the signature's alg {str(alg)[:20]!r} is not its key's")
        try:
            if self.alg == "EdDSA":
                self.native.verify(signature, signed)
                return
            _, _, digest, size = ECDSA[self.alg]
            if len(signature) != 2 * size:
                raise EnvelopeError(f"an {self.alg} signature is {2 * size} bytes")
            r = int.from_bytes(signature[:size], "big")
            s = int.from_bytes(signature[size:], "big")
            self.native.verify(encode_dss_signature(r, s), signed, ec.ECDSA(digest))
        except InvalidSignature as exc:
            raise EnvelopeError("the signature does not verify") from exc


@dataclass(frozen=True)
class Signature:
    protected: str  # as written: part of what was signed
    header: dict[str, Any]  # protected and unprotected members together
    signature: bytes

    @property
    def kid(self) -> str | None:
        kid = self.header.get("kid")
        return kid if isinstance(kid, str) and kid else None


@dataclass(frozen=True)
class Jws:
    payload_b64: str
    signatures: tuple[Signature, ...]

    @property
    def payload(self) -> bytes:
        return b64url_decode(self.payload_b64, "payload")

    def verify(self, signature: Signature, key: VerifyingKey) -> bytes:
        """The payload, once `signature` verifies with `key`."""
        signed = f"{signature.protected}.{self.payload_b64}".encode("ascii")
        key.verify(signature.header.get("alg"), signature.signature, signed)
        return self.payload


def parse(raw: bytes | str | dict[str, Any]) -> Jws:
    """A JWS in General or Flattened JSON form, checked for shape (not yet verified)."""
    data = raw if isinstance(raw, dict) else _json(raw, "the signed message")
    if not isinstance(data, dict) or not isinstance(data.get("payload"), str):
        raise EnvelopeError("a signed message is a JSON object with a payload")
    entries = data.get("signatures")
    if entries is None and "signature" in data:  # flattened
        entries = [{k: data.get(k) for k in ("protected", "header", "signature")}]
    if not isinstance(entries, list) or not entries or len(entries) > MAX_SIGNATURES:
        raise EnvelopeError("a signed message has 1 to 16 signatures")
    signatures = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("protected"), str):
            raise EnvelopeError("a signature has no protected header")
        protected = _json(b64url_decode(entry["protected"], "protected"), "its protected header")
        unprotected = entry.get("header") or {}
        if not isinstance(protected, dict) or not isinstance(unprotected, dict):
            raise EnvelopeError("a signature's headers are JSON objects")
        if protected.get("alg") not in ALGORITHMS:
            raise EnvelopeError(f"unsupported signature alg {str(protected.get('alg'))[:20]!r}")
        signature = b64url_decode(entry.get("signature"), "signature")
        signatures.append(Signature(entry["protected"], {**unprotected, **protected}, signature))
    b64url_decode(data["payload"], "payload")  # readable, or EnvelopeError
    return Jws(data["payload"], tuple(signatures))


def sign(payload: bytes, kid: str, key: ed25519.Ed25519PrivateKey) -> dict[str, Any]:
    """`payload` signed with EdDSA by `kid`, in General JSON form."""
    protected = b64url_encode(orjson.dumps({"typ": TYP, "alg": "EdDSA", "kid": kid}))
    body = b64url_encode(payload)
    signature = key.sign(f"{protected}.{body}".encode("ascii"))
    return {
        "payload": body,
        "signatures": [
            {"protected": protected, "signature": b64url_encode(signature), "header": {"kid": kid}}
        ],
    }


def parse_jwt(token: object) -> tuple[dict[str, Any], dict[str, Any], Jws]:
    """A compact JWT (`from_prior`): its header and claims, and the JWS to verify it."""
    if not isinstance(token, str) or token.count(".") != 2 or len(token) > 16_384:
        raise EnvelopeError("a JWT is three base64url parts separated by dots")
    protected, payload, signature = token.split(".")
    header = _json(b64url_decode(protected, "JWT header"), "the JWT header")
    claims = _json(b64url_decode(payload, "JWT claims"), "the JWT claims")
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise EnvelopeError("a JWT's header and claims are JSON objects")
    if header.get("alg") not in ALGORITHMS:
        raise EnvelopeError(f"unsupported JWT alg {str(header.get('alg'))[:20]!r}")
    jws = Jws(payload, (Signature(protected, header, b64url_decode(signature, "JWT signature")),))
    return header, claims, jws


def _json(raw: bytes | str, what: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise EnvelopeError(f"{what} is not JSON") from exc
