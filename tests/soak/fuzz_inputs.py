"""What the fuzzer throws: one generator per layer, each a seeded function of a `random.Random`.

- `bytes`: random, truncated and non-UTF-8 bytes, and the odd huge body;
- `json`: hostile JSON shapes (wrong types, nesting 10,000 deep, huge numbers and strings,
  duplicate keys);
- `envelope`: a real envelope to the mediator with its header, recipients, iv, tag and
  ciphertext mutated;
- `plaintext`: a well-encrypted message from a connected, mediated agent whose plaintext is
  mutated (types, ids, threads, attachments, keylists, limits, ids of other connections);
- `handshake`: DID Exchange and connections requests with mutated DIDs, DID documents and
  signatures, anoncrypted or authcrypted by the requester's key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Callable
from typing import Any

import orjson

from mediator.client import Recipient
from mediator.didcomm import envelope
from mediator.didcomm.did_doc import QUEUE_ENDPOINT
from mediator.didcomm.did_peer import numalgo1_did, numalgo2_did, numalgo4_did
from mediator.didcomm.keys import KeyPair, b58encode
from mediator.didcomm.message import DID_SOV, DIDCOMM_ORG
from mediator.didcomm.signatures import sign_attachment, sign_connection

ORG = DIDCOMM_ORG
HUGE = 300_000  # a "huge" string or list, well under the envelope limit


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def hostile(rng: random.Random, *, big: bool = True) -> Any:
    """A value a handler does not expect: wrong types, extremes, nesting, size (only when
    `big`: a list of them stays small)."""
    pick = rng.randrange(24)
    if not big and pick in (5, 6, 8, 22):
        return "x" * 65
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([-1, 0, 1, -(2**63), 2**63 - 1, 2**64 - 1, 10**18])
    if pick == 3:
        return rng.choice([1e308, -1e308, 0.5, -0.0, 1e-320])
    if pick == 4:
        return ""
    if pick == 5:
        return "x" * rng.choice([65, 1000, HUGE])
    if pick == 6:
        return [rng.randrange(100) for _ in range(rng.choice([0, 1, 1000]))]
    if pick == 7:
        return {}
    if pick == 8:
        return nested(rng.choice([33, 40, 500]))
    if pick == 9:
        return "\u202e\u0000\uffff😀"
    if pick == 10:
        return "did:key:z6Mk" + "".join(rng.choices("123456789ABCDEFGHJKLMNPQRSTUVWXYZabc", k=44))
    if pick == 11:
        return "did:peer:2.Vz6Mk" + "1" * rng.randrange(60)
    if pick == 12:
        return str(rng.randrange(10**12))
    if pick == 13:
        return [None, "x", 1, {}]
    if pick == 14:
        return {"@id": "x" * 8, "data": {"base64": "!!!"}}
    if pick == 15:
        return "12345678"
    if pick == 16:
        return -rng.randrange(1, 10**9)
    if pick == 17:
        return {"thid": rng.choice(["", "x", "a" * 65, 7, None])}
    if pick == 18:
        return [[[[[]]]]]
    if pick == 19:
        return "../" * 30
    if pick == 20:
        return rng.choice(["all", "none", "thread", "ALL"])
    if pick == 21:
        return "1" * 44
    if pick == 22:
        return {str(i): i for i in range(200)}
    return rng.random()


def dumps(value: Any) -> bytes:
    """JSON of anything the generators make: orjson, or the standard library for nesting
    deeper than orjson writes (the fuzzer raises its own recursion limit for this)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode("utf-8", "surrogatepass")


def mutate_json(rng: random.Random, value: Any, rounds: int = 1, *, big: bool = True) -> Any:
    """Replace, drop or add a value somewhere in a copy of `value` (large values only when
    `big`)."""
    value = json.loads(dumps(value))
    for _ in range(rounds):
        value = _mutate_at(rng, value, 0, big)
    return value


def _mutate_at(rng: random.Random, value: Any, depth: int, big: bool) -> Any:
    if isinstance(value, dict) and value and rng.random() < 0.7 and depth < 6:
        key = rng.choice(list(value))
        action = rng.randrange(5)
        if action == 0:
            del value[key]
        elif action == 1:
            value[rng.choice([key + "x", "~" + key, "@" + key, ""])] = hostile(rng, big=big)
        else:
            value[key] = _mutate_at(rng, value[key], depth + 1, big)
        return value
    if isinstance(value, list) and value and rng.random() < 0.7 and depth < 6:
        i = rng.randrange(len(value))
        action = rng.randrange(4)
        if action == 0:
            value.pop(i)
        elif action == 1:
            value.extend(value[:1] * rng.choice([1, 100 if len(dumps(value[:1])) < 1000 else 1]))
        else:
            value[i] = _mutate_at(rng, value[i], depth + 1, big)
        return value
    return hostile(rng, big=big)


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """Bit flips, truncation, splices and non-UTF-8 bytes."""
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 8])):
        pick = rng.randrange(6)
        if not out:
            out += rng.randbytes(8)
        i = rng.randrange(len(out))
        if pick == 0:
            out[i] ^= 1 << rng.randrange(8)
        elif pick == 1:
            del out[rng.randrange(len(out) + 1) :]
        elif pick == 2:
            out[i:i] = rng.randbytes(rng.randrange(1, 16))
        elif pick == 3:
            out[i:i] = rng.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x00", b'"', b"\\"])
        elif pick == 4:
            del out[i : i + rng.randrange(1, 32)]
        else:
            j = rng.randrange(len(out))
            out[i:i] = out[j : j + rng.randrange(1, 64)]
    return bytes(out)


# ---------------------------------------------------------------------------- bytes, json


def raw_bytes(rng: random.Random, sample: bytes) -> bytes:
    pick = rng.randrange(10)
    if pick < 3:
        return rng.randbytes(rng.choice([0, 1, 7, 100, 4000]))
    if pick < 7:
        return mutate_bytes(rng, sample)
    if pick < 9:
        return sample[: rng.randrange(len(sample))]
    if rng.random() < 0.1:  # huge: over the envelope limit, or just under it
        return b"{" + b" " * rng.choice([2 * 1024 * 1024 + 10, 1024 * 1024]) + b"}"
    return bytes(rng.randrange(128, 256) for _ in range(rng.randrange(1, 200)))


def json_shape(rng: random.Random) -> bytes:
    pick = rng.randrange(12)
    if pick == 0:
        depth = rng.choice([10_001, 20_000])
        return b"[" * depth + b"]" * depth
    if pick == 1:
        depth = rng.choice([1_000, 10_001])
        return b'{"a":' * depth + b"1" + b"}" * depth
    if pick == 2:
        return b'{"protected": "x", "protected": 1, "iv": "a", "iv": "b"}'
    if pick == 3:
        return b"9" * rng.choice([20, 400, 5000]) + (b".5e999999" if rng.random() < 0.5 else b"")
    if pick == 4:
        return orjson.dumps({"protected": "a" * rng.choice([1000, HUGE])})
    if pick == 5:
        return orjson.dumps(rng.choice([[], "", 0, None, True, [{}], {"": ""}]))
    if pick == 6:
        shape = {k: hostile(rng) for k in ("protected", "iv", "ciphertext", "tag", "recipients")}
        return dumps({k: v for k, v in shape.items() if rng.random() < 0.8})
    if pick == 7:
        return b'{"protected":' + orjson.dumps(b64(b'{"alg":"Authcrypt"' * 3)) + b"}"
    if pick == 8:
        return orjson.dumps({"@type": ORG + "trust_ping/1.0/ping", "@id": "12345678"})
    if pick == 9:
        return b'{"a": "\\ud800", "protected": "\\udfff"}'
    if pick == 10:
        return b'{"protected": "' + b"A" * 40 + b'", "x": 1e400, "y": -1e400, "z": NaN}'
    return dumps(mutate_json(rng, {"protected": "e30", "iv": "", "tag": "", "ciphertext": ""}))


# ---------------------------------------------------------------------------- envelopes


class EnvelopeMutator:
    """A real envelope (anoncrypt or authcrypt to the mediator) taken apart and mutated."""

    def __init__(self, rng: random.Random, mediator: str, sender: KeyPair) -> None:
        self.rng = rng
        ping = orjson.dumps({"@type": ORG + "trust_ping/1.0/ping", "@id": "ping-1234"})
        self.samples = [
            orjson.loads(envelope.pack(ping, [mediator], sender)),
            orjson.loads(envelope.pack(ping, [mediator])),
        ]

    def __call__(self) -> bytes:
        rng = self.rng
        outer = dict(rng.choice(self.samples))
        header = orjson.loads(base64.urlsafe_b64decode(outer["protected"] + "=="))
        target = rng.randrange(9)
        if target == 0:
            header = mutate_json(rng, header, rng.choice([1, 2, 3]))
        elif target == 1:
            header["recipients"] = rng.choice(
                [[], [None], "x", {}, header["recipients"] * rng.choice([2, 101, 5000])]
            )
        elif target == 2:
            recipient = dict(header["recipients"][0])
            recipient["header"] = mutate_json(rng, recipient["header"])
            if rng.random() < 0.5:
                recipient["encrypted_key"] = rng.choice(
                    [b64(rng.randbytes(rng.randrange(80))), 1, None, "!!"]
                )
            header["recipients"] = [recipient]
        elif target == 3:
            header[rng.choice(["enc", "typ", "alg"])] = hostile(rng)
        if target <= 3:
            outer["protected"] = b64(dumps(header))
        elif target == 4:
            outer["protected"] = rng.choice(
                [outer["protected"][:-3], outer["protected"] + "A", "é", "", 12, None]
            )
        else:
            name = rng.choice(["iv", "tag", "ciphertext", "protected"])
            raw = base64.urlsafe_b64decode(str(outer[name]) + "==")
            if rng.random() < 0.3:
                outer[name] = hostile(rng)
            else:
                outer[name] = b64(mutate_bytes(rng, raw))
        if rng.random() < 0.05:
            outer.pop(rng.choice(list(outer)), None)
        return dumps(outer)


# ---------------------------------------------------------------------------- plaintext


# Tails of a forwarded envelope's JSON text that orjson would not write back.
QUEUED_EXTRAS = (
    b',"x":"\\ud800"}',
    b',"x":' + b"9" * 40 + b"}",
    b',"x":' + b"[" * 2000 + b"]" * 2000 + b"}",
    b',"x":NaN}',
    b',"x":1e400}',
)

MUTATED_TYPES = (
    "messagepickup/3.0/status-request",
    "messagepickup/2.99/delivery-request",
    "messagepickup/0.1/batch-pickup",
    "coordinate-mediation/2.0/mediate-request",
    "routing/2.0/forward",
    "queue/9.0/fetch-request",
    "nonexistent/1.0/thing",
    "didexchange/2.0/request",
    "connections/1.1/response",
    "notification/1.0/problem-report",
    "messagepickup/1.0/problem_report",
    "trust_ping/1.0/ping_response",
    "discover-features/2.0/queries",
    "push-notifications-fcm/1.0/set-device-info",
    "push-notifications-apns/1.0/get-device-info",
    "basicmessage/1.0/message",
    "x/1.0/noop",
)


def templates(agent: Recipient, own_key: str, others: list[str]) -> list[dict[str, Any]]:
    """Valid messages of every family an agent may send, to mutate."""
    forward_inner = orjson.loads(envelope.pack(b"{}", [own_key]))
    m = agent.message
    return [
        m("messagepickup/2.0/status-request", recipient_key=own_key),
        m("messagepickup/2.0/delivery-request", limit=3, recipient_key=own_key),
        m("messagepickup/2.0/messages-received", message_id_list=["a" * 32]),
        m("messagepickup/2.0/live-delivery-change", live_delivery=True),
        m("messagepickup/2.0/live-delivery-change", live_delivery=False),
        m("messagepickup/1.0/batch-pickup", batch_size=2),
        m("messagepickup/1.0/status-request"),
        m("messagepickup/1.0/noop"),
        m("queue/1.0/status-request"),
        m("queue/1.0/status-update-request", update={"message_count_limit": 100}),
        m("queue/1.0/fetch-request", message_count_limit=2, message_id_list=[]),
        m("coordinate-mediation/1.0/mediate-request"),
        m(
            "coordinate-mediation/1.0/keylist-update",
            updates=[{"recipient_key": own_key, "action": "add"}],
        ),
        m(
            "coordinate-mediation/1.0/keylist-update",
            updates=[{"recipient_key": k, "action": "add"} for k in others[:3]],
        ),
        m("coordinate-mediation/1.0/keylist-query", paginate={"limit": 2, "offset": 0}),
        m("routing/1.0/forward", to=own_key, msg=forward_inner),
        m("trust_ping/1.0/ping", response_requested=True),
        m("discover-features/1.0/query", query="*"),
        m("push-notifications-fcm/1.0/set-device-info", device_token="t", device_platform="p"),
        m("push-notifications-fcm/1.0/get-device-info"),
        m("didexchange/1.1/complete", **{"~thread": {"thid": "a" * 36}}),
        m("noop/1.0/noop"),
        m(
            "basicmessage/1.0/message",
            content="hi",
            **{"~attach": [{"@id": "att-0001", "data": {"base64": b64(b"x")}}]},
        ),
    ]


class PlaintextMutator:
    """Mutated plaintexts of one agent's connection, each packed (authcrypt) to the mediator:
    the envelope is always good, the message inside is not."""

    def __init__(
        self, rng: random.Random, agent: Recipient, own_key: str, others: Callable[[], list[str]]
    ) -> None:
        self.rng = rng
        self.agent = agent
        self.own_key = own_key
        self.others = others  # ids and keys of other connections, as they become known
        self.corpus = templates(agent, own_key, [])

    def message(self) -> Any:
        rng = self.rng
        msg = dict(rng.choice(self.corpus))
        msg["@id"] = self.agent.new_id()
        pick = rng.randrange(16)
        if pick == 0:
            name = rng.choice(MUTATED_TYPES)
            msg["@type"] = rng.choice([ORG, DID_SOV, "http://didcomm.org/", ""]) + name
        elif pick == 1:
            msg["@id"] = hostile(rng)
        elif pick == 2:
            msg["~thread"] = mutate_json(
                rng,
                {
                    "thid": "t" * 12,
                    "pthid": "p" * 12,
                    "sender_order": 1,
                    "received_orders": {self.own_key: 0},
                },
                rng.choice([1, 2]),
            )
        elif pick == 3:
            msg["~transport"] = mutate_json(
                rng, {"return_route": "thread", "return_route_thread": msg["@id"]}
            )
        elif pick == 4:
            msg["~attach"] = [
                {
                    "@id": hostile(rng, big=False),
                    "data": {rng.choice(["base64", "json", "links"]): hostile(rng, big=False)},
                }
                for _ in range(rng.choice([1, 3, 200]))
            ]
        elif pick == 5:
            count = rng.choice([1, 10, 999, 1000, 1001, 3000])
            msg = self.agent.message(
                "coordinate-mediation/1.0/keylist-update",
                updates=[
                    {
                        "recipient_key": rng.choice(
                            [hostile(rng, big=False), *self.others()[:1], self.own_key]
                        ),
                        "action": rng.choice(["add", "remove", "delete", None]),
                    }
                    for _ in range(count if count < 1000 or rng.random() < 0.05 else 3)
                ],
            )
        elif pick == 6:
            msg = self.agent.message(
                "queue/1.0/status-update-request",
                update={
                    rng.choice(
                        [
                            "message_count_limit",
                            "size_limit",
                            "message_size_limit",
                            "duration_limit",
                            "will_queue",
                            "other",
                        ]
                    ): hostile(rng)
                },
            )
        elif pick == 7:
            ids = self.others() or ["x" * 36]
            msg = self.agent.message(
                rng.choice(["messagepickup/2.0/messages-received", "queue/1.0/fetch-request"]),
                message_id_list=rng.choice([ids[:50], ids[:1] * 1000, hostile(rng), [1, 2]]),
            )
        elif pick == 8:
            msg = self.agent.message(
                "messagepickup/2.0/delivery-request",
                limit=hostile(rng) if rng.random() < 0.7 else 5,
                recipient_key=rng.choice([self.own_key, hostile(rng), *self.others()[:1]]),
            )
        elif pick == 9:
            msg[rng.choice(["deep", "@type", "~thread", "updates"])] = nested(rng.choice([33, 64]))
        elif pick == 10:
            msg["padding"] = "p" * rng.choice([1000, HUGE])
        elif pick == 11:
            return hostile(rng)
        elif pick == 12:  # a queued envelope that pickups read back and must still carry
            inner = orjson.loads(envelope.pack(b"{}", [self.own_key]))
            text = dumps(inner)[:-1] + rng.choice(QUEUED_EXTRAS)
            msg = self.agent.message("routing/1.0/forward", to=self.own_key, msg=text.decode())
        else:
            msg = mutate_json(rng, msg, rng.choice([1, 2, 3]))
        return msg

    def __call__(self) -> bytes:
        rng = self.rng
        msg = self.message()
        body = dumps(msg)
        if rng.random() < 0.15:
            body = mutate_bytes(rng, body)
        return envelope.pack(body, [self.agent.mediator], self.agent.keys)


# ---------------------------------------------------------------------------- handshakes


def core_doc(did: str, keys: KeyPair, endpoint: str) -> dict[str, Any]:
    return {
        "@context": ["https://w3id.org/did/v1"],
        "id": did,
        "verificationMethod": [
            {
                "id": "#key-1",
                "type": "Ed25519VerificationKey2018",
                "controller": did,
                "publicKeyBase58": keys.verkey_b58,
            }
        ],
        "authentication": ["#key-1"],
        "service": [
            {
                "id": "#didcomm",
                "type": "did-communication",
                "serviceEndpoint": endpoint,
                "recipientKeys": ["#key-1"],
                "routingKeys": [],
                "priority": 0,
            }
        ],
    }


HOSTILE_DOC_VALUES: tuple[Any, ...] = (
    "\ud800",
    {"a": "\udfff"},
    10**100,
    -(10**50),
    1e400,
    nested(2_000),
    [None] * 40,
)
ENDPOINTS = (QUEUE_ENDPOINT, "http://127.0.0.1:9/", "ws://127.0.0.1:9/", "https://[::1", "")


class HandshakeMutator:
    """DID Exchange and connections requests with mutated DIDs, documents and signatures."""

    def __init__(self, rng: random.Random, mediator: str) -> None:
        self.rng = rng
        self.mediator = mediator
        self.keys = [KeyPair.generate() for _ in range(64)]

    def _doc(self, did: str, keys: KeyPair) -> dict[str, Any]:
        rng = self.rng
        doc = core_doc(did, keys, rng.choice(ENDPOINTS))
        if rng.random() < 0.5:
            doc = mutate_json(rng, doc, rng.choice([1, 2]), big=False)
        if isinstance(doc, dict) and rng.random() < 0.3:
            where = rng.choice(["service", "verificationMethod", "id", "x"])
            value = rng.choice(HOSTILE_DOC_VALUES)
            if where == "service" and isinstance(doc.get("service"), list) and doc["service"]:
                service = doc["service"][0]
                if isinstance(service, dict):
                    service[rng.choice(["priority", "serviceEndpoint", "type", "routingKeys"])] = (
                        value
                    )
            else:
                doc[where] = value
        return doc

    def _did(self, keys: KeyPair) -> tuple[str, Any, Any]:
        """(did, did_doc~attach, inline doc)."""
        rng = self.rng
        form = rng.randrange(6)
        if form == 0:  # did:peer:2, mutated as text
            did = numalgo2_did(keys, [rng.choice(ENDPOINTS)])
            if rng.random() < 0.6:
                did = _mutate_did(rng, did)
            return did, None, None
        if form == 1:  # did:peer:2 with a hostile service
            service = rng.choice(
                [
                    *HOSTILE_DOC_VALUES,
                    hostile(rng, big=False),
                    {"t": "did-communication", "s": "http://127.0.0.1:9/", "priority": 10**30},
                ]
            )
            text = json.dumps(service)
            did = numalgo2_did(keys, []) + ".S" + b64(text.encode())
            return did, None, None
        if form == 2:  # long-form did:peer:4 of a (mutated) document: the hash matches
            doc = self._doc("", keys)
            try:
                text = json.dumps(doc)
            except (ValueError, TypeError):
                text = ""
            if len(text) > 20_000:  # past any DID the node reads: encoding it would only
                # cost the fuzzer (base58 is quadratic), so the DID is as long, not as valid
                did = "did:peer:4zQm" + "z" * len(text)
            else:
                try:
                    did = numalgo4_did(doc if isinstance(doc, dict) else {"x": doc})
                except (ValueError, TypeError):
                    did = "did:peer:4zQm"
            return (_mutate_did(rng, did) if rng.random() < 0.3 else did), None, None
        if form == 3:  # did:peer:1 with a signed attachment of a (mutated) document
            doc = self._doc("", keys)
            payload = json.dumps(doc).encode()
            return _numalgo1(doc), self._attach(payload, keys), None
        did = "did:sov:" + keys.verkey_b58[:22] if form == 4 else keys.verkey_b58[:22]
        doc = self._doc(did, keys)
        payload = json.dumps(doc).encode("utf-8", "surrogatepass")
        return did, self._attach(payload, keys), doc

    def _attach(self, payload: bytes, keys: KeyPair) -> Any:
        rng = self.rng
        data = sign_attachment(payload, keys)
        pick = rng.randrange(8)
        if pick == 0:
            data = mutate_json(rng, data, rng.choice([1, 2]), big=False)
        elif pick == 1:
            data["jws"]["protected"] = b64(
                rng.choice(
                    [
                        b"[" * 5000 + b"]" * 5000,
                        b'{"alg":"EdDSA","jwk":' + b"[" * 3000,
                        b"\xff",
                        orjson.dumps(
                            {"alg": "EdDSA", "jwk": {"kty": "OKP", "crv": "Ed25519", "x": "!"}}
                        ),
                        orjson.dumps({"alg": "EdDSA", "kid": "did:key:z6LS" + "1" * 40}),
                    ]
                )
            )
        elif pick == 2:
            data["jws"]["signature"] = b64(
                mutate_bytes(rng, base64.urlsafe_b64decode(data["jws"]["signature"] + "=="))
            )
        elif pick == 3:
            data["jws"] = {"signatures": rng.choice([[], [data["jws"]] * 9, "x", [1]])}
        elif pick == 4:
            data["base64"] = b64(rng.choice([b"[" * 3000 + b"]" * 3000, b"\xff\xfe", b"1" * 5000]))
            data["jws"] = sign_attachment(base64.urlsafe_b64decode(data["base64"] + "=="), keys)[
                "jws"
            ]
        return {"@id": "attach-1", "mime-type": "application/json", "data": data}

    def __call__(self) -> bytes:
        rng = self.rng
        keys = rng.choice(self.keys) if rng.random() < 0.2 else KeyPair.generate()
        did, attach, inline = self._did(keys)
        request_id = "req-" + rng.randbytes(8).hex()
        thread: dict[str, Any] = {"thid": request_id}
        if rng.random() < 0.3:
            thread["pthid"] = rng.choice(["unknown-invitation", hostile(rng, big=False)])
        if rng.random() < 0.25:  # connections 1.0
            msg: dict[str, Any] = {
                "@type": ORG + "connections/1.0/request",
                "@id": request_id,
                "label": hostile(rng),
                "connection": {
                    "DID": did,
                    "DIDDoc": inline
                    if inline is not None
                    else core_doc(did, keys, rng.choice(ENDPOINTS)),
                },
            }
            if rng.random() < 0.3:
                msg["connection"] = mutate_json(rng, msg["connection"], big=False)
            if rng.random() < 0.2:
                msg["connection~sig"] = mutate_json(rng, sign_connection({"DID": did}, keys))
        else:
            version = rng.choice(["1.0", "1.1", "1.1", "2.0", "1.9"])
            msg = {
                "@type": ORG + f"didexchange/{version}/request",
                "@id": request_id,
                "label": "fuzz",
                "did": did,
                "~thread": thread,
            }
            if attach is not None:
                msg["did_doc~attach"] = attach
            if rng.random() < 0.1:
                msg["did_rotate~attach"] = attach
            if rng.random() < 0.1:
                msg = mutate_json(rng, msg, big=False)
        if rng.random() < 0.7 and isinstance(msg, dict):
            msg["~transport"] = {"return_route": "all"}
        body = json.dumps(msg).encode("utf-8", "surrogatepass")
        return envelope.pack(body, [self.mediator], keys if rng.random() < 0.5 else None)


def _numalgo1(doc: Any) -> str:
    """The did:peer:1 of a document, also of one no UTF-8 can hold (ASCII-escaped)."""
    if not isinstance(doc, dict):
        return "did:peer:1zQm" + "1" * 44
    try:
        return numalgo1_did(doc)
    except ValueError:
        stored = {k: v for k, v in doc.items() if k != "id"}
        text = json.dumps(stored, separators=(",", ":")).encode()
        return "did:peer:1z" + b58encode(b"\x12\x20" + hashlib.sha256(text).digest())


def _mutate_did(rng: random.Random, did: str) -> str:
    pick = rng.randrange(7)
    if pick == 0:
        return did[: rng.randrange(len(did))]
    if pick == 1:
        return "did:peer:" + rng.choice("0356789x") + did[10:]
    if pick == 2:
        return did.replace(".Vz", ".V" + rng.choice("fumx0"), 1)
    if pick == 3:
        return did.replace(".V", "." + rng.choice("QZ*é"), 1)
    if pick == 4:
        i = rng.randrange(10, len(did))
        return did[:i] + rng.choice(["0", "O", "l", "I", "=", "-", ":", "%"]) + did[i + 1 :]
    if pick == 5:
        return did + ".S" + b64(rng.choice([b"[" * 3000 + b"]" * 3000, b"\xff", b"null"]))
    return did + ":" + did
