"""The `mailboxes` table: one row per queue (DIDComm mailboxes and mqs queues) per snapshot.

Recipients appear only as `mailbox`, a keyed hash of the queue's name (pseudonyms.py); an mqs
queue, which is the operator's own, also keeps its `name`. Times are Unix milliseconds,
null when never.
"""

from __future__ import annotations

from spark.tables.columns import Column, Table

C = Column
MAILBOXES = Table(
    "mailboxes",
    (
        C("namespace", "string", "didcomm or mqs"),
        C("mailbox", "string", "keyed hash (HMAC-SHA256, 32 hex) of the queue's qualified name"),
        C("name", "string", "an mqs queue's name; null for DIDComm mailboxes"),
        C("shard", "int", "the engine's storage shard (0-1023)"),
        C("server", "string", "host:port the row was read from"),
        C("read_ms", "long", "the server's clock when the shard was read"),
        C("created_ms", "long", "when the queue was created (mediation granted)"),
        C("stored", "long", "messages in the stream: visible and in flight"),
        C("visible", "long", "messages a receive would hand out now"),
        C("in_flight", "long", "messages handed out whose visibility deadline has not passed"),
        C("delayed", "long", "messages not yet due (mqs delay)"),
        C("bytes", "long", "body bytes held, stored and delayed"),
        C("oldest_ms", "long", "first enqueue time of the oldest message"),
        C("newest_ms", "long", "first enqueue time of the newest message"),
        C("last_added_ms", "long", "when a message was last added"),
        C("last_delivered_ms", "long", "when a message was last handed out"),
        C("last_removed_ms", "long", "when a message was last removed by id"),
        C("retention_seconds", "long", "duration limit (2147483647: none)"),
        C("visibility_timeout_seconds", "long", "how long a handed-out message stays hidden"),
        C("delay_seconds", "long", "delay of new messages"),
        C("max_messages", "long", "count limit; null: none"),
        C("max_bytes", "long", "size limit; null: none"),
        C("max_message_bytes", "long", "message size limit; null: none"),
        C("max_receives", "long", "deliveries before dead-lettering (mqs); null: none"),
        C("will_queue", "boolean", "false: the recipient asked not to queue"),
        C(
            "inflight_delivery_counts",
            "array<int>",
            "how often each in-flight message was "
            "handed out (at most 1,000 listed; `in_flight` is exact)",
        ),
        C("dead_letter_queue", "string", "mqs: the name of its dead letter queue"),
        C("dead_letter_sources", "int", "mqs: how many queues use this one as theirs"),
        C("outbox", "long", "mqs: dead-lettered messages on their way to the dead letter queue"),
        C("live", "boolean", "a live socket on a running node holds the mailbox"),
        C("live_node", "string", "the node whose socket holds it"),
        C("connection_state", "string", "granted, denied, completed or responded (DIDComm)"),
        C("handshake_protocol", "string", "e.g. didexchange/1.1"),
        C("connection_ms", "long", "when the connection's handshake was recorded"),
        C("keys", "int", "recipient keys registered (its keylist)"),
        C("explicit_pickup", "boolean", "it has spoken a pickup or queue protocol"),
        C("push_registered", "boolean", "it registered a push endpoint"),
        C("push_failures", "int", "failed push attempts in a row"),
        C("memory_sampled", "boolean", "MEMORY USAGE was asked for this mailbox's keys"),
        C("memory_bytes", "long", "sum of MEMORY USAGE over its keys, when sampled"),
    ),
)
