"""Compact JWS (RFC 7515) signing and checking for the two algorithms the providers use, written
with `cryptography` alone: RS256 (RSASSA-PKCS1-v1_5 with SHA-256, Google's service-account
assertions) and ES256 (ECDSA P-256 with SHA-256, APNs provider tokens), whose signature is the
raw 64-byte r||s of RFC 7518 §3.4, not the DER that `cryptography` produces and expects."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)


class MalformedToken(ValueError):
    """Not three base64url parts whose first two are JSON objects."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    if any(c in text for c in "+/="):
        raise MalformedToken("not base64url without padding")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise MalformedToken(str(e)) from e


def _json_part(obj: dict[str, Any]) -> str:
    return b64url(json.dumps(obj, separators=(",", ":")).encode())


@dataclass(frozen=True)
class Jws:
    """A compact JWS split into its parts; `signing_input` is what the signature covers."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


def parse(token: str) -> Jws:
    parts = token.split(".")
    if len(parts) != 3:
        raise MalformedToken("a compact JWS has three parts")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MalformedToken(str(e)) from e
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise MalformedToken("header and claims must be JSON objects")
    return Jws(header, claims, f"{parts[0]}.{parts[1]}".encode(), b64url_decode(parts[2]))


def sign_rs256(claims: dict[str, Any], key: rsa.RSAPrivateKey, kid: str | None) -> str:
    header: dict[str, Any] = {"alg": "RS256", "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing_input = f"{_json_part(header)}.{_json_part(claims)}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


def verify_rs256(jws: Jws, key: rsa.RSAPublicKey) -> bool:
    try:
        key.verify(jws.signature, jws.signing_input, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def sign_es256(claims: dict[str, Any], key: ec.EllipticCurvePrivateKey, kid: str) -> str:
    header = {"alg": "ES256", "kid": kid}
    signing_input = f"{_json_part(header)}.{_json_part(claims)}"
    der = key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def verify_es256(jws: Jws, key: ec.EllipticCurvePublicKey) -> bool:
    if len(jws.signature) != 64:  # a DER signature here is a client bug that APNs refuses
        return False
    r = int.from_bytes(jws.signature[:32], "big")
    s = int.from_bytes(jws.signature[32:], "big")
    try:
        key.verify(encode_dss_signature(r, s), jws.signing_input, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True
