"""Compact JWS signing for the two provider logins: RS256 (Google's OAuth 2 service-account
assertion, RFC 7523) and ES256 (the APNs provider token). Only signing: the providers verify."""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from mediator.errors import ConfigError


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _signing_input(header: dict[str, Any], claims: dict[str, Any]) -> bytes:
    head = b64url(json.dumps(header, separators=(",", ":")).encode())
    body = b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{head}.{body}".encode()


def load_private_key(pem: bytes, where: str) -> rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: not a PEM private key ({exc})") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{where}: an RSA or EC P-256 key is needed")
    return key


def sign_rs256(key: rsa.RSAPrivateKey, header: dict[str, Any], claims: dict[str, Any]) -> str:
    data = _signing_input({"alg": "RS256", "typ": "JWT", **header}, claims)
    signature = key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    return f"{data.decode()}.{b64url(signature)}"


def sign_es256(
    key: ec.EllipticCurvePrivateKey, header: dict[str, Any], claims: dict[str, Any]
) -> str:
    """JWS ES256: the signature is r and s as two 32-byte big-endian numbers (RFC 7518
    3.4), not the DER that the library produces."""
    data = _signing_input({"alg": "ES256", **header}, claims)
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
    return f"{data.decode()}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
