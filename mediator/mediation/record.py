"""A connection's record: the fields of its queue's config hash that say who it is.

A million recipients keep one each, so names and values are short, and a value an idle
recipient always has fits a small listpack (docs/engine.md, Memory). What each field means:

    h    handshake state: r (responded) or c (completed)
    ht   when the handshake was recorded (ms)
    p    the handshake protocol, e.g. didexchange/1.1; didcomm/v2 for a DIDComm v2 wallet
         (no handshake: written at its grant)
    th   the handshake's thread, until it completes
    s    push endpoints (compact JSON, defaults left out: handshakes.services_json)
    m    mediation: g (granted) or d (denied); the grant's time is the queue's `created`
    mt   when mediation was denied (ms)
    x    it fetches explicitly (it has spoken a pickup or queue protocol)
    pa   failed push attempts in a row
    dv   the phone's notification service: fcm or apns (push-notifications-<dv>/1.0)
    dt   1: it has a device token (the token itself: `ConnectionKeys.device`, a string
         beside the record, so that the record stays a listpack)
    dp   its platform;  da  its app (mediator/notify/apps.py)
    nl   when it was last notified (ms);  na  failed notification attempts in a row
    nq   a message came since its pending notification was last looked at
    nc   a claim of its notification not settled yet;  ni  the notification's id (retries)
    k:<32 raw bytes>   a registered recipient key (its keylist); its value is empty, or
         the DID (or DID URL) a DIDComm v2 wallet registered it as, which its keylist
         query answers with (a did:peer:2 of a few hundred bytes makes that record a hash
         table rather than a listpack: a v2 wallet's record costs more than a v1 one's)

A connection carried over from another mediator (`mediator import`) also has:

    ik   our key on it, sealed (mediator/mediation/imported.py): not derived from our seed
    kf   b: keylist answers name keys in base58, as its old mediator did (else did:key)
    iq   how many of its queued messages the import has put in its queue

None of these names is a queue field (mediator/engine/model.py QUEUE_FIELDS), nor starts
with `q:` (a queue's tally of a sender's bytes, mediator/mediation/senders.py).
"""

from __future__ import annotations

from typing import Final

HANDSHAKE: Final = "h"
HANDSHAKE_MS: Final = "ht"
PROTOCOL: Final = "p"
THREAD: Final = "th"
SERVICES: Final = "s"
MEDIATION: Final = "m"
DENIED_MS: Final = "mt"
EXPLICIT: Final = "x"
PUSH_ATTEMPTS: Final = "pa"
DEVICE_SERVICE: Final = "dv"  # these and the notification fields: also notify.lua's
DEVICE_TOKEN: Final = "dt"
DEVICE_PLATFORM: Final = "dp"
DEVICE_APP: Final = "da"
KEY: Final = b"k:"  # + the recipient key's raw bytes
IMPORTED_KEY: Final = "ik"
KEY_FORMAT: Final = "kf"
BASE58: Final = "b"  # KEY_FORMAT's value
DIDCOMM_V2: Final = "didcomm/v2"  # PROTOCOL's value for a DIDComm v2 wallet
IMPORTED_MESSAGES: Final = "iq"

# What the code calls the states, and how the record writes them.
RESPONDED: Final = "responded"
COMPLETED: Final = "completed"
GRANTED: Final = "granted"
DENIED: Final = "denied"
CODES: Final = {RESPONDED: "r", COMPLETED: "c", GRANTED: "g", DENIED: "d"}
_NAMES: Final = {(HANDSHAKE, v): k for k, v in CODES.items() if k in (RESPONDED, COMPLETED)} | {
    (MEDIATION, v): k for k, v in CODES.items() if k in (GRANTED, DENIED)
}


def state_of(field: str, code: bytes | str | None) -> str | None:
    """The state a field's code stands for (None when absent)."""
    if code is None:
        return None
    text = code.decode() if isinstance(code, bytes) else code
    return _NAMES.get((field, text), text)
