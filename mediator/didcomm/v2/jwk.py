"""Key agreement keys of DIDComm v2 (X25519, P-256, P-384, P-521) as JWKs, and their
Diffie-Hellman.

Every public key read from the wire is checked before it is used: a NIST point must be on
its curve and its coordinates of the curve's size (an invalid-curve attack recovers the
private key from answers to points off the curve), an X25519 key must be 32 bytes and must
not give the all-zero shared secret of a low-order point. Failures raise EnvelopeError
with the reason; nothing else escapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, x25519
from nacl.bindings import crypto_box_keypair, crypto_scalarmult, crypto_scalarmult_base
from nacl.exceptions import CryptoError

from mediator.didcomm.envelope import b64url_decode, b64url_encode
from mediator.errors import EnvelopeError

X25519 = "X25519"
NIST: dict[str, ec.EllipticCurve] = {
    "P-256": ec.SECP256R1(),
    "P-384": ec.SECP384R1(),
    "P-521": ec.SECP521R1(),
}
CURVES = (X25519, *NIST)
SIZES = {X25519: 32, "P-256": 32, "P-384": 48, "P-521": 66}  # bytes of a coordinate


@dataclass(frozen=True)
class PublicKey:
    """A key agreement public key: its curve and coordinates (`y` for NIST curves)."""

    crv: str
    x: bytes
    y: bytes = b""

    @classmethod
    def from_jwk(cls, jwk: Any, what: str = "key") -> PublicKey:
        """The public key of a JWK (`kty` OKP or EC), checked as the module says."""
        if not isinstance(jwk, dict):
            raise EnvelopeError(f"{what} must be a JWK object")
        crv, kty = jwk.get("crv"), jwk.get("kty")
        if crv == X25519:
            if kty != "OKP":
                raise EnvelopeError(f"{what}: an X25519 key has kty OKP, not {kty!r}")
            key = cls(crv, _coordinate(jwk.get("x"), crv, f"{what} x"))
        elif isinstance(crv, str) and crv in NIST:
            if kty != "EC":
                raise EnvelopeError(f"{what}: a {crv} key has kty EC, not {kty!r}")
            x = _coordinate(jwk.get("x"), crv, f"{what} x")
            key = cls(crv, x, _coordinate(jwk.get("y"), crv, f"{what} y"))
        else:
            raise EnvelopeError(f"{what}: unsupported curve {str(crv)[:20]!r}")
        if crv != X25519:  # any 32 bytes are an X25519 key: a weak one fails in `agree`
            key.native()  # on its curve, or EnvelopeError
        return key

    def jwk(self) -> dict[str, str]:
        if self.crv == X25519:
            return {"kty": "OKP", "crv": X25519, "x": b64url_encode(self.x)}
        return {
            "kty": "EC",
            "crv": self.crv,
            "x": b64url_encode(self.x),
            "y": b64url_encode(self.y),
        }

    def native(self) -> Any:
        """The `cryptography` key (EnvelopeError when the point is not on the curve)."""
        return _native_public(self.crv, self.x, self.y)


# Static-static agreements remembered (authcrypt, both ways), oldest dropped first: one
# exchange of the two (or three) each message costs, for the wallets a node talks to.
STATIC_AGREEMENTS = 16_384
_static: dict[tuple[PublicKey, PublicKey], bytes] = {}


@dataclass(frozen=True)
class PrivateKey:
    """A key agreement private key and its public half. An X25519 key is kept as its 32
    secret bytes and agrees through libsodium (no object to make for an ephemeral key:
    `cryptography` spends a scalar multiplication making one), a NIST key as a
    `cryptography` key."""

    public: PublicKey
    _native: Any = field(repr=False, compare=False)  # X25519: the secret bytes

    @property
    def crv(self) -> str:
        return self.public.crv

    @classmethod
    def generate(cls, crv: str) -> PrivateKey:
        """A fresh key on `crv` (an ephemeral key of an envelope)."""
        if crv == X25519:
            public, secret = crypto_box_keypair()
            return cls(PublicKey(X25519, public), secret)
        if crv not in NIST:
            raise EnvelopeError(f"unsupported curve {crv[:20]!r}")
        return cls.of_native(ec.generate_private_key(NIST[crv]))

    @classmethod
    def from_jwk(cls, jwk: Any, what: str = "private key") -> PrivateKey:
        public = PublicKey.from_jwk(jwk, what)
        d = b64url_decode(jwk.get("d"), f"{what} d")
        if public.crv == X25519:
            if len(d) != 32:
                raise EnvelopeError(f"{what}: an X25519 private key is 32 bytes")
            key = cls.from_x25519_bytes(d)
        else:
            if len(d) != SIZES[public.crv]:
                raise EnvelopeError(
                    f"{what}: a {public.crv} private key is {SIZES[public.crv]} bytes"
                )
            try:
                scalar = int.from_bytes(d, "big")
                key = cls.of_native(ec.derive_private_key(scalar, NIST[public.crv]))
            except ValueError as exc:
                raise EnvelopeError(f"{what}: not a {public.crv} private key") from exc
        if key.public != public:
            raise EnvelopeError(f"{what}: its public half does not match d")
        return key

    @classmethod
    def from_x25519_bytes(cls, secret: bytes) -> PrivateKey:
        return cls(PublicKey(X25519, crypto_scalarmult_base(secret)), bytes(secret))

    @classmethod
    def of_native(cls, native: Any) -> PrivateKey:
        numbers = native.public_key().public_numbers()
        crv = next(name for name, curve in NIST.items() if curve.name == native.curve.name)
        size = SIZES[crv]
        return cls(
            PublicKey(crv, numbers.x.to_bytes(size, "big"), numbers.y.to_bytes(size, "big")),
            native,
        )

    def agree(self, other: PublicKey) -> bytes:
        """The Diffie-Hellman shared secret Z with `other` (same curve)."""
        if other.crv != self.crv:
            raise EnvelopeError(f"a {other.crv} key cannot agree with a {self.crv} key")
        if self.crv == X25519:
            try:
                return bytes(crypto_scalarmult(self._native, other.x))
            except CryptoError as exc:  # a low-order point gives the all-zero secret
                raise EnvelopeError("key agreement with a weak public key") from exc
        try:
            return bytes(self._native.exchange(ec.ECDH(), other.native()))
        except ValueError as exc:
            raise EnvelopeError("key agreement with a weak public key") from exc

    def agree_static(self, other: PublicKey) -> bytes:
        """`agree` between two long-lived keys (authcrypt's sender and recipient keys: the
        same pair for every message between them), remembered for STATIC_AGREEMENTS pairs."""
        pair = (self.public, other)
        found = _static.get(pair)
        if found is None:
            found = self.agree(other)
            if len(_static) >= STATIC_AGREEMENTS:
                _static.pop(next(iter(_static)))
            _static[pair] = found
        return found

    def jwk(self) -> dict[str, str]:
        if self.crv == X25519:
            d = self._native
        else:
            d = self._native.private_numbers().private_value.to_bytes(SIZES[self.crv], "big")
        return {**self.public.jwk(), "d": b64url_encode(d)}


def _coordinate(value: Any, crv: str, what: str) -> bytes:
    raw = b64url_decode(value, what)
    if len(raw) != SIZES[crv]:
        raise EnvelopeError(f"{what} must be {SIZES[crv]} bytes for {crv}, not {len(raw)}")
    return raw


def _native_public(crv: str, x: bytes, y: bytes) -> Any:
    if crv == X25519:
        return x25519.X25519PublicKey.from_public_bytes(x)
    try:
        numbers = ec.EllipticCurvePublicNumbers(
            int.from_bytes(x, "big"), int.from_bytes(y, "big"), NIST[crv]
        )
        return numbers.public_key()
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise EnvelopeError(f"the {crv} point is not on its curve") from exc
