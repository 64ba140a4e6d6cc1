"""DIDComm v2 envelopes checked against two other implementations: what Veramo 7 and the
Identus SDK 7 packed (tests/data/didcomm_v2_peers, made by interop/v2/gen-samples.sh) opens
here to the plaintext they packed, anoncrypt and authcrypt, with every content encryption
they wrote; Veramo's authcrypt (ECDH-1PU draft 3) is said, so an answer can match it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mediator.didcomm.v2.jwk import PrivateKey
from mediator.didcomm.v2.unpack import unpack

SAMPLES = Path(__file__).parent / "data" / "didcomm_v2_peers"
SECRETS = json.loads((SAMPLES / "recipient-secrets.json").read_text())
OURS = {k["kid"]: PrivateKey.from_jwk(k) for k in SECRETS["keys"] if k["crv"] == "X25519"}
NAMES = sorted(p.name.removesuffix(".jwe.json") for p in SAMPLES.glob("*.jwe.json"))


def test_every_kind_of_sample_is_there() -> None:
    assert {n.split("-A256")[0] for n in NAMES} == {
        "veramo-anon", "veramo-auth", "identus-anon", "identus-auth",
    }  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_a_message_another_implementation_packed_opens_here(name: str) -> None:
    got = unpack((SAMPLES / f"{name}.jwe.json").read_bytes(), OURS.get, (SECRETS["did"],))
    assert got.message == json.loads((SAMPLES / f"{name}.plaintext.json").read_text())
    authcrypt = "-auth" in name
    assert got.layers == (("authcrypt",) if authcrypt else ("anoncrypt",))
    assert (got.sender is not None) == authcrypt
    assert got.tagless == name.startswith("veramo-auth")  # ECDH-1PU draft 3
