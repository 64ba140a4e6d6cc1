"""The content encryption of DIDComm v2 envelopes (JWE `enc`): A256CBC-HS512 (RFC 7518
§5.2.5, required, the only one authcrypt allows), A256GCM and XC20P (XChaCha20-Poly1305).

`aad` is the JWE's additional authenticated data: the ASCII of its protected header as
written (base64url). A wrong key, IV, tag or ciphertext raises EnvelopeError.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import nacl.bindings as sodium
import nacl.exceptions
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mediator.errors import EnvelopeError
from mediator.randomness import random_bytes

A256CBC_HS512 = "A256CBC-HS512"
A256GCM = "A256GCM"
XC20P = "XC20P"


@dataclass(frozen=True)
class Sealed:
    iv: bytes
    ciphertext: bytes
    tag: bytes


@dataclass(frozen=True)
class Algorithm:
    name: str
    key_size: int  # bytes of the content encryption key
    iv_size: int
    tag_size: int

    def new_key(self) -> bytes:
        return random_bytes(self.key_size)

    def encrypt(self, key: bytes, plaintext: bytes, aad: bytes) -> Sealed:
        iv = random_bytes(self.iv_size)
        if self.name == A256CBC_HS512:
            mac_key, enc_key = key[:32], key[32:]
            n = 16 - len(plaintext) % 16  # PKCS#7
            padded = plaintext + bytes((n,)) * n
            encryptor = Cipher(algorithms.AES(enc_key), modes.CBC(iv)).encryptor()
            ciphertext = encryptor.update(padded) + encryptor.finalize()
            return Sealed(iv, ciphertext, _cbc_tag(mac_key, aad, iv, ciphertext))
        if self.name == A256GCM:
            out = AESGCM(key).encrypt(iv, plaintext, aad)
        else:
            out = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, aad, iv, key)
        return Sealed(iv, out[: -self.tag_size], out[-self.tag_size :])

    def decrypt(self, key: bytes, sealed: Sealed, aad: bytes) -> bytes:
        if len(key) != self.key_size:
            raise EnvelopeError(f"{self.name} takes a {self.key_size}-byte key")
        if len(sealed.iv) != self.iv_size or len(sealed.tag) != self.tag_size:
            raise EnvelopeError(f"{self.name}: the iv or tag has the wrong length")
        if self.name == A256CBC_HS512:
            mac_key, enc_key = key[:32], key[32:]
            expected = _cbc_tag(mac_key, aad, sealed.iv, sealed.ciphertext)
            if not hmac.compare_digest(expected, sealed.tag):
                raise EnvelopeError("the message was altered or not encrypted for this key")
            if not sealed.ciphertext or len(sealed.ciphertext) % 16:
                raise EnvelopeError("the ciphertext is not whole AES blocks")
            decryptor = Cipher(algorithms.AES(enc_key), modes.CBC(sealed.iv)).decryptor()
            padded = decryptor.update(sealed.ciphertext) + decryptor.finalize()
            # PKCS#7, checked after the tag (no padding oracle: a forged message never
            # gets here), without the cost of an unpadder object.
            n = padded[-1]
            if not 1 <= n <= 16 or padded[-n:] != bytes((n,)) * n:
                raise EnvelopeError("the ciphertext's padding is wrong")
            return padded[:-n]
        try:
            if self.name == A256GCM:
                return AESGCM(key).decrypt(sealed.iv, sealed.ciphertext + sealed.tag, aad)
            return bytes(
                sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
                    sealed.ciphertext + sealed.tag, aad, sealed.iv, key
                )
            )
        except (InvalidTag, nacl.exceptions.CryptoError) as exc:
            raise EnvelopeError("the message was altered or not encrypted for this key") from exc


ALGORITHMS = {
    A256CBC_HS512: Algorithm(A256CBC_HS512, 64, 16, 32),
    A256GCM: Algorithm(A256GCM, 32, 12, 16),
    XC20P: Algorithm(XC20P, 32, 24, 16),
}


def algorithm(name: object) -> Algorithm:
    found = ALGORITHMS.get(name) if isinstance(name, str) else None
    if found is None:
        raise EnvelopeError(f"unsupported content encryption {str(name)[:30]!r}")
    return found


def _cbc_tag(mac_key: bytes, aad: bytes, iv: bytes, ciphertext: bytes) -> bytes:
    """RFC 7518 §5.2.2.1: HMAC-SHA-512 over AAD, IV, ciphertext and AAD's length in bits,
    its first half."""
    length = (len(aad) * 8).to_bytes(8, "big")
    return hmac.new(mac_key, aad + iv + ciphertext + length, hashlib.sha512).digest()[:32]
