"""DIDComm v1 envelopes and keys: round trips both ways with two independent implementations
(aries-staticagent, and didcomm-messaging's legacy DIDComm v1 crypto), published did:key
vectors, and every malformed envelope refused with EnvelopeError and its reason."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import nacl.bindings as sodium
import pytest
from aries_staticagent import crypto as staticagent
from didcomm_messaging.legacy import crypto as dm_legacy

from mediator.didcomm import envelope
from mediator.didcomm.keys import (
    KeyPair,
    b58decode,
    b58encode,
    did_key_to_verkey,
    ed25519_to_x25519_public,
    ed25519_to_x25519_secret,
    normalize_key,
    verkey_to_did_key,
)
from mediator.errors import EnvelopeError, InvalidKey

LIBRARIES = [
    pytest.param(staticagent, id="aries-staticagent"),
    pytest.param(dm_legacy, id="didcomm-messaging"),
]
MODES = pytest.mark.parametrize("authcrypt", [True, False], ids=["authcrypt", "anoncrypt"])


def finder(*pairs: KeyPair) -> Callable[[str], KeyPair | None]:
    return {p.verkey_b58: p for p in pairs}.get


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def header_of(outer: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(unb64(outer["protected"]))
    return result


def their_pack(
    lib: ModuleType, text: str, to: list[KeyPair], sender: KeyPair | None
) -> dict[str, Any]:
    packed = lib.pack_message(
        text,
        [k.verkey for k in to],
        sender.verkey if sender else None,
        sender.sigkey if sender else None,
    )
    return dict(packed)


# ------------------------------------------------------------------ interoperability


@pytest.mark.parametrize("lib", LIBRARIES)
@MODES
def test_we_open_what_they_pack_for_several_recipients(lib: ModuleType, authcrypt: bool) -> None:
    me, others, sender = KeyPair.generate(), [KeyPair.generate(), KeyPair.generate()], None
    if authcrypt:
        sender = KeyPair.generate()
    packed = their_pack(lib, '{"hello": "world"}', [others[0], me, others[1]], sender)
    data = json.dumps(packed).encode()

    opened = envelope.unpack(data, finder(me))

    assert json.loads(opened.message) == {"hello": "world"}
    assert opened.recipient_verkey == me.verkey_b58
    assert opened.sender_verkey == (sender.verkey_b58 if sender else None)
    assert envelope.recipient_kids(data) == [
        others[0].verkey_b58,
        me.verkey_b58,
        others[1].verkey_b58,
    ]
    # The same envelope as text, and as the JSON object a transport already parsed.
    assert envelope.unpack(data.decode(), finder(me)) == opened
    assert envelope.unpack(packed, finder(me)) == opened


@pytest.mark.parametrize("lib", LIBRARIES)
@MODES
def test_every_recipient_of_ours_opens_it_with_their_library(
    lib: ModuleType, authcrypt: bool
) -> None:
    recipients = [KeyPair.generate() for _ in range(3)]
    sender = KeyPair.generate() if authcrypt else None
    packed = envelope.pack(b'{"n": 1}', [r.verkey_b58 for r in recipients], sender)

    for recipient in recipients:
        message, sender_vk, recipient_vk = lib.unpack_message(
            packed, recipient.verkey, recipient.sigkey
        )
        assert json.loads(message) == {"n": 1}
        assert recipient_vk == recipient.verkey_b58
        assert sender_vk == (sender.verkey_b58 if sender else None)


def test_did_keys_as_recipients_are_written_as_base58_kids() -> None:
    to = KeyPair.generate()
    packed = envelope.pack(b"{}", [to.did_key], KeyPair.generate())
    assert envelope.recipient_kids(packed) == [to.verkey_b58]
    message, _, _ = staticagent.unpack_message(packed, to.verkey, to.sigkey)
    assert message == "{}"


def test_non_ascii_content_from_didcomm_messaging_opens() -> None:
    # didcomm-messaging splits ciphertext from tag by character count, not bytes: for
    # non-ASCII text its "tag" is longer than 16 bytes. Readers join the two again.
    me = KeyPair.generate()
    text = '{"greeting": "grüß dich ✓"}'
    packed = their_pack(dm_legacy, text, [me], KeyPair.generate())
    assert len(unb64(packed["tag"])) > 16
    opened = envelope.unpack(json.dumps(packed).encode(), finder(me))
    assert opened.message.decode() == text


def test_what_we_write_says_what_real_agents_say() -> None:
    sender, to = KeyPair.generate(), KeyPair.generate()
    outer = json.loads(envelope.pack(b"{}", [to.verkey_b58], sender))
    assert set(outer) == {"protected", "iv", "ciphertext", "tag"}
    header = header_of(outer)
    assert header["enc"] == "xchacha20poly1305_ietf" and header["typ"] == "JWM/1.0"
    assert header["alg"] == "Authcrypt"
    assert set(header["recipients"][0]["header"]) == {"kid", "sender", "iv"}
    assert len(unb64(header["recipients"][0]["header"]["iv"])) == 24  # crypto_box nonce
    assert len(unb64(outer["iv"])) == 12  # ChaCha20-Poly1305 IETF, as every real agent writes
    assert len(unb64(outer["tag"])) == 16
    anon = header_of(json.loads(envelope.pack(b"{}", [to.verkey_b58])))
    assert anon["alg"] == "Anoncrypt" and set(anon["recipients"][0]["header"]) == {"kid"}


def test_base64_as_each_implementation_writes_it() -> None:
    to = KeyPair.generate()
    # askar (Credo, ACA-Py) and didcomm-messaging write unpadded base64url, as JWE does; so do we.
    ours = json.loads(envelope.pack(b"{}", [to.verkey_b58], KeyPair.generate()))
    assert all("=" not in value for value in ours.values())
    assert all("=" not in value for value in header_of(ours)["recipients"][0]["header"].values())
    assert "=" not in their_pack(dm_legacy, "{}", [to], None)["tag"]
    # aries-staticagent pads. We read both (the round trips above), and the standard alphabet.
    assert their_pack(staticagent, "{}", [to], None)["tag"].endswith("==")
    standard = {
        key: base64.b64encode(unb64(value)).decode() if key != "protected" else value
        for key, value in ours.items()
    }
    assert envelope.unpack(json.dumps(standard).encode(), finder(to)).message == b"{}"


def test_xchacha_content_with_a_24_byte_nonce_is_read_too() -> None:
    # What the header's name says, although nobody writes it: read it all the same.
    to, sender = KeyPair.generate(), KeyPair.generate()
    cek = bytes(range(32))
    recipients = [_authcrypt_recipient(cek, to, sender)]
    outer = _craft(cek, recipients, "Authcrypt", b'{"x": 2}', nonce=b"n" * 24, xchacha=True)
    opened = envelope.unpack(outer, finder(to))
    assert opened.message == b'{"x": 2}' and opened.sender_verkey == sender.verkey_b58


def test_the_first_recipient_we_hold_is_used() -> None:
    a, b = KeyPair.generate(), KeyPair.generate()
    packed = envelope.pack(b"{}", [a.verkey_b58, b.verkey_b58])
    assert envelope.unpack(packed, finder(b, a)).recipient_verkey == a.verkey_b58
    assert envelope.unpack(packed, finder(b)).recipient_verkey == b.verkey_b58


# -------------------------------------------------------------------------- keys

# ACA-Py's test DID document (aries_cloudagent/did/tests/test_dids.py) and the did:key
# specification's example: Ed25519 key, did:key, and the X25519 key agreement key.
VECTORS = [
    (
        "did:key:z6MkmjY8GnV5i9YTDtPETC2uUAW6ejw3nk5mXF5yci5ab7th",
        "8HH5gYEeNc3z7PYXmd54d4x6qAfCNrqQqEB3nS7Zfu7K",
        "did:key:z6LShpNhGwSupbB7zjuivH156vhLJBDDzmQtA4BY9S94pe1K",
    ),
    (
        "did:key:z6MkpTHR8VNsBxYAAWHut2Geadd9jSwuBV8xRoAnwWsdvktH",
        "B12NYF8RrR3h41TDCTJojY59usg3mbtbjnFs7Eud1Y6u",
        "did:key:z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc",
    ),
]


@pytest.mark.parametrize(("did", "verkey", "x25519_did"), VECTORS, ids=["acapy", "did-key-spec"])
def test_did_key_vectors(did: str, verkey: str, x25519_did: str) -> None:
    assert did_key_to_verkey(did) == verkey
    assert did_key_to_verkey(did + "#" + did.removeprefix("did:key:")) == verkey
    assert verkey_to_did_key(verkey) == did
    assert normalize_key(did) == normalize_key(verkey) == verkey
    x25519 = b58decode(x25519_did.removeprefix("did:key:z"))
    assert x25519[:2] == b"\xec\x01"
    assert ed25519_to_x25519_public(b58decode(verkey)) == x25519[2:]


def test_a_third_vector_and_an_rfc_8032_seed() -> None:
    # Credo's test DID document for did:key:z6MkvePy…
    assert verkey_to_did_key("HC8vuuvP8x9kVJizh2eujQjo2JwFQJz6w63szzdbu1Q7") == (
        "did:key:z6MkvePyWAApUVeDboZhNbckaWHnqtD6pCETd6xoqGbcpEBV"
    )
    # RFC 8032 section 7.1, test 1.
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    pair = KeyPair.from_seed(seed)
    assert pair.verkey.hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    assert pair.did_key == verkey_to_did_key(pair.verkey_b58)
    assert did_key_to_verkey(pair.did_key) == pair.verkey_b58 == b58encode(pair.verkey)


def test_x25519_secret_matches_the_public_key() -> None:
    pair = KeyPair.generate()
    secret = ed25519_to_x25519_secret(pair.sigkey)
    assert sodium.crypto_scalarmult_base(secret) == ed25519_to_x25519_public(pair.verkey)
    assert (pair.x25519_secret, pair.x25519_public) == (
        secret,
        ed25519_to_x25519_public(pair.verkey),
    )


def test_key_pairs_check_themselves_and_keep_the_secret_out_of_repr() -> None:
    pair = KeyPair.generate()
    assert len(pair.verkey) == 32 and len(pair.sigkey) == 64
    assert pair.sigkey.hex() not in repr(pair) and pair.verkey_b58 not in repr(pair.sigkey)
    with pytest.raises(InvalidKey, match="seed is 32 bytes"):
        KeyPair.from_seed(b"short")
    with pytest.raises(InvalidKey, match="not the 64-byte NaCl key"):
        KeyPair(pair.verkey, KeyPair.generate().sigkey)
    with pytest.raises(InvalidKey, match="32 bytes"):
        KeyPair(pair.verkey[:31], pair.sigkey)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "base58 Ed25519 verkey or a did:key"),
        (None, "base58 Ed25519 verkey or a did:key"),
        ("abc", "decodes to 3 bytes"),
        ("0OIl" * 11, "not base58"),
        ("8HH5gYEeNc3z7PYXmd54d4x6qAfCNrqQqEB3nS7Zfu7K\n", "not base58"),
        ("did:peer:2.Ez6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc", "not a did:key"),
        ("did:key:f6d6b6579", "not base58btc"),
        ("did:key:z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc", "X25519"),
        ("did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme", "not an Ed25519 did:key"),
        ("did:key:z" + b58encode(b"\xed\x01" + bytes(31)), "31 key bytes"),
    ],
    ids=[
        "empty",
        "not-a-string",
        "too-short",
        "bad-alphabet",
        "whitespace",
        "did-peer",
        "not-base58btc",
        "x25519",
        "secp256k1",
        "short-did-key",
    ],
)
def test_bad_keys_are_refused_with_the_reason(value: Any, reason: str) -> None:
    with pytest.raises(InvalidKey, match=reason):
        normalize_key(value)


def test_base58_helpers() -> None:
    assert b58encode(b"\x00\x01\x02") == "15T" and b58decode("15T") == b"\x00\x01\x02"
    for bad in ("", "0", "l", "abc def", "é"):
        with pytest.raises(InvalidKey):
            b58decode(bad)
    with pytest.raises(InvalidKey, match="decodes to 31 bytes"):
        verkey_to_did_key(b58encode(bytes(31)))


def test_base58_round_trips_and_keys_are_their_own_canonical_form() -> None:
    rng = random.Random(58)
    samples = [b"", bytes(1), bytes(3), b"\x00\x00\xff", bytes(32), b"\xff" * 32]
    samples += [bytes(rng.randrange(3)) + rng.randbytes(rng.randrange(1, 40)) for _ in range(500)]
    for raw in samples:
        text = b58encode(raw)
        if text:
            assert b58decode(text) == raw, raw
    for _ in range(200):  # a 32-byte key's base58 is already canonical: normalized as is
        zeros = rng.randrange(2)
        verkey = b58encode(bytes(zeros) + rng.randbytes(32 - zeros))
        assert normalize_key(verkey) == verkey == b58encode(b58decode(verkey))


# ------------------------------------------------------------- malformed envelopes


def _authcrypt_recipient(cek: bytes, to: KeyPair, sender: KeyPair) -> dict[str, Any]:
    nonce = bytes(24)
    return {
        "encrypted_key": b64(sodium.crypto_box(cek, nonce, to.x25519_public, sender.x25519_secret)),
        "header": {
            "kid": to.verkey_b58,
            "sender": b64(sodium.crypto_box_seal(sender.verkey_b58.encode(), to.x25519_public)),
            "iv": b64(nonce),
        },
    }


def _craft(
    cek: bytes,
    recipients: list[dict[str, Any]],
    alg: str,
    message: bytes = b"{}",
    *,
    nonce: bytes = bytes(12),
    xchacha: bool = False,
) -> bytes:
    """An envelope built by hand, content encrypted properly, so that a fault placed in the
    recipients is the only fault."""
    header = {
        "enc": "xchacha20poly1305_ietf",
        "typ": "JWM/1.0",
        "alg": alg,
        "recipients": recipients,
    }
    protected = b64(json.dumps(header).encode())
    encrypt = (
        sodium.crypto_aead_xchacha20poly1305_ietf_encrypt
        if xchacha
        else sodium.crypto_aead_chacha20poly1305_ietf_encrypt
    )
    sealed = encrypt(message, protected.encode(), nonce, cek)
    outer = {
        "protected": protected,
        "iv": b64(nonce),
        "ciphertext": b64(sealed[:-16]),
        "tag": b64(sealed[-16:]),
    }
    return json.dumps(outer).encode()


TO = KeyPair.generate()
SENDER = KeyPair.generate()
CEK = bytes(range(32))


def _valid() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(envelope.pack(b'{"ok": true}', [TO.verkey_b58], SENDER))
    return result


def _with_header(change: Callable[[dict[str, Any]], None]) -> bytes:
    recipient = _authcrypt_recipient(CEK, TO, SENDER)
    change(recipient)
    return _craft(CEK, [recipient], "Authcrypt")


def _flip(field: str) -> bytes:
    outer = _valid()
    raw = bytearray(unb64(outer[field]))
    raw[0] ^= 1
    outer[field] = b64(bytes(raw))
    return json.dumps(outer).encode()


def _outer(**changes: Any) -> bytes:
    outer = _valid()
    for key, value in changes.items():
        if value is None:
            outer.pop(key)
        else:
            outer[key] = value
    return json.dumps(outer).encode()


def _protected(value: Any) -> bytes:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return _outer(protected=b64(raw))


MALFORMED: list[tuple[str, Callable[[], bytes], str]] = [
    ("empty", lambda: b"", "not JSON"),
    ("not-json", lambda: b"garbage", "not JSON"),
    ("not-utf8", lambda: b"\xff\xfe{}", "not JSON"),
    ("array", lambda: b"[]", "not a JSON object"),
    ("no-protected", lambda: _outer(protected=None), "no protected header"),
    ("protected-number", lambda: _outer(protected=5), "no protected header"),
    ("protected-not-base64", lambda: _outer(protected="!!!"), "protected is not base64url"),
    ("protected-truncated", lambda: _outer(protected="eyJhbGc"[:5]), "protected is not base64url"),
    ("protected-not-json", lambda: _protected(b"not json"), "protected header is not JSON"),
    ("protected-array", lambda: _protected([1]), "not a JSON object"),
    ("no-recipients", lambda: _protected({"alg": "Anoncrypt"}), "names no recipients"),
    (
        "empty-recipients",
        lambda: _protected({"alg": "Anoncrypt", "recipients": []}),
        "names no recipients",
    ),
    (
        "recipient-no-kid",
        lambda: _protected({"alg": "Anoncrypt", "recipients": [{"header": {}}]}),
        "no header.kid",
    ),
    (
        "recipient-not-object",
        lambda: _protected({"alg": "Anoncrypt", "recipients": ["x"]}),
        "no header.kid",
    ),
    (
        "too-many-recipients",
        lambda: _protected({"alg": "Anoncrypt", "recipients": [{"header": {"kid": "k"}}] * 101}),
        "more than 100 recipients",
    ),
    (
        "unknown-alg",
        lambda: _protected({"alg": "ECDH-1PU", "recipients": [{"header": {"kid": "k"}}]}),
        "unknown envelope alg",
    ),
    (
        "not-for-us",
        lambda: envelope.pack(b"{}", [KeyPair.generate().verkey_b58]),
        "not addressed to any key held here",
    ),
    ("no-ciphertext", lambda: _outer(ciphertext=None), "ciphertext must be a base64url string"),
    ("ciphertext-not-base64", lambda: _outer(ciphertext="%%%"), "ciphertext is not base64url"),
    ("no-iv", lambda: _outer(iv=None), "iv must be a base64url string"),
    ("iv-wrong-size", lambda: _outer(iv=b64(bytes(5))), "neither ChaCha20"),
    ("no-tag", lambda: _outer(tag=None), "tag must be a base64url string"),
    ("too-short", lambda: _outer(ciphertext="", tag=b64(bytes(4))), "shorter than a tag"),
    ("ciphertext-tampered", lambda: _flip("ciphertext"), "content does not decrypt"),
    ("tag-tampered", lambda: _flip("tag"), "content does not decrypt"),
    ("iv-tampered", lambda: _flip("iv"), "content does not decrypt"),
    (
        "protected-swapped",
        lambda: _outer(
            protected=json.loads(envelope.pack(b"{}", [TO.verkey_b58], SENDER))["protected"]
        ),
        "does not decrypt",
    ),
    (
        "authcrypt-no-sender",
        lambda: _with_header(lambda r: r["header"].pop("sender")),
        "needs header.sender and header.iv",
    ),
    (
        "authcrypt-no-iv",
        lambda: _with_header(lambda r: r["header"].update(iv=None)),
        "needs header.sender and header.iv",
    ),
    (
        "recipient-iv-size",
        lambda: _with_header(lambda r: r["header"].update(iv=b64(bytes(12)))),
        "header.iv is 12 bytes",
    ),
    (
        "sender-garbage",
        lambda: _with_header(lambda r: r["header"].update(sender=b64(bytes(60)))),
        "header.sender does not decrypt",
    ),
    (
        "sender-not-a-key",
        lambda: _with_header(
            lambda r: r["header"].update(
                sender=b64(sodium.crypto_box_seal(b"not a key", TO.x25519_public))
            )
        ),
        "header.sender is not a base58 Ed25519 verkey",
    ),
    (
        "sender-someone-else",
        lambda: _with_header(
            lambda r: r["header"].update(
                sender=b64(
                    sodium.crypto_box_seal(KeyPair.generate().verkey_b58.encode(), TO.x25519_public)
                )
            )
        ),
        "content key does not decrypt from this sender",
    ),
    (
        "encrypted-key-missing",
        lambda: _with_header(lambda r: r.pop("encrypted_key")),
        "encrypted_key must be",
    ),
    (
        "anoncrypt-key-garbage",
        lambda: _craft(
            CEK, [{"encrypted_key": b64(bytes(80)), "header": {"kid": TO.verkey_b58}}], "Anoncrypt"
        ),
        "content key does not decrypt with our key",
    ),
    (
        "anoncrypt-key-short",
        lambda: _craft(
            CEK, [{"encrypted_key": b64(bytes(10)), "header": {"kid": TO.verkey_b58}}], "Anoncrypt"
        ),
        "content key does not decrypt with our key",
    ),
    (
        "cek-wrong-size",
        lambda: _craft(
            CEK,
            [
                {
                    "encrypted_key": b64(sodium.crypto_box_seal(bytes(16), TO.x25519_public)),
                    "header": {"kid": TO.verkey_b58},
                }
            ],
            "Anoncrypt",
        ),
        "content key is 16 bytes",
    ),
]


@pytest.mark.parametrize(
    ("build", "reason"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_envelopes_raise_envelope_error_with_the_reason(
    build: Callable[[], bytes], reason: str
) -> None:
    data = build()
    with pytest.raises(EnvelopeError, match=reason):
        envelope.unpack(data, finder(TO))


def test_the_crafting_helpers_make_valid_envelopes() -> None:
    # So that each malformed case above fails for its one fault and no other.
    assert (
        envelope.unpack(_with_header(lambda r: None), finder(TO)).sender_verkey == SENDER.verkey_b58
    )
    assert envelope.unpack(json.dumps(_valid()).encode(), finder(TO)).message == b'{"ok": true}'


def test_recipient_kids_refuses_what_is_not_an_envelope() -> None:
    for data in (b"", b"[]", _outer(protected="!!!"), _protected({"alg": "Anoncrypt"})):
        with pytest.raises(EnvelopeError):
            envelope.recipient_kids(data)


def test_mangled_envelopes_never_raise_anything_but_envelope_error() -> None:
    rng = random.Random(19)
    base = envelope.pack(b'{"fuzz": 1}', [TO.verkey_b58, KeyPair.generate().verkey_b58], SENDER)
    values: list[Any] = [
        None,
        0,
        -1,
        1.5,
        True,
        "",
        "=",
        "A",
        "!!",
        [],
        {},
        [1],
        {"a": 1},
        "x" * 300,
    ]
    outcomes = {"opened": 0, "refused": 0}
    for _ in range(3000):
        if rng.random() < 0.5:
            data = bytearray(base)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            candidate = bytes(data)
        else:
            outer = json.loads(base)
            header = header_of(outer)
            target: dict[str, Any] = rng.choice(
                [outer, header, header["recipients"][0], header["recipients"][0]["header"]]
            )
            target[rng.choice([*target, "extra"])] = rng.choice(values)
            if target is not outer:
                outer["protected"] = b64(json.dumps(header).encode())
            candidate = json.dumps(outer).encode()
        try:
            envelope.unpack(candidate, finder(TO))
            outcomes["opened"] += 1
        except EnvelopeError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 2500


def test_pack_refuses_what_it_cannot_write() -> None:
    with pytest.raises(EnvelopeError, match="at least one recipient"):
        envelope.pack(b"{}", [])
    with pytest.raises(EnvelopeError, match="at most 100 recipients"):
        envelope.pack(b"{}", [TO.verkey_b58] * 101)
    with pytest.raises(InvalidKey, match="decodes to 3 bytes"):
        envelope.pack(b"{}", ["abc"])
