"""The OpenAPI 3.1 document of the mqs API, served at /openapi.json.

It states what the server does, status codes and headers included, and is checked against a
running node by schemathesis (tests/test_mqs_openapi.py). Its links let a client, or a
state-machine test, chain create queue -> send -> receive -> delete message -> delete queue.
"""

from __future__ import annotations

import re
from typing import Any

from mediator.engine.model import INT32_MAX
from mediator.mqs import headers, ranges

QUEUE_NAME_PATTERN = f"^{headers.QUEUE_NAME.pattern}$"
MESSAGE_ID_PATTERN = f"^{headers.MESSAGE_ID.pattern}$"
# The `Range` forms mqs reads (mediator/mqs/ranges.py), or an empty header (no range).
# (Its groups unnamed: JSON Schema's and Python's regular expressions name them differently.)
RANGE_PATTERN = "^(" + re.sub(r"\?P<\w+>", "?:", ranges.PATTERN) + ")?$"
_ID_SCHEMA = {"type": "string", "pattern": MESSAGE_ID_PATTERN}
_NAME_SCHEMA = {"type": "string", "pattern": QUEUE_NAME_PATTERN, "minLength": 1, "maxLength": 80}
_ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
_BINARY = {"type": "string", "format": "binary"}
_DATE_TIME = {"type": "string", "format": "date-time"}
_COUNT = {"type": "string", "pattern": "^[0-9]+$"}


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"#/components/{kind}/{name}"}


def _err(text: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": text, "content": _ERROR_BODY}
    if headers:
        answer["headers"] = headers
    return answer


def _int_header(name: str, low: int, high: int, required: bool, text: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": required,
        "description": text,
        "schema": {"type": "integer", "minimum": low, "maximum": high},
    }


def _responses(ok: dict[str, Any], **errors: str) -> dict[str, Any]:
    """`ok` and the operation's own errors, then the answers every mqs operation can give."""
    out = {**ok, **{code.removeprefix("s"): _err(text) for code, text in errors.items()}}
    for code in ("401", "403", "500", "503", "507"):
        out[code] = _ref("responses", f"E{code}")
    return out


def _link(operation_id: str, text: str, **parameters: str) -> dict[str, Any]:
    return {"operationId": operation_id, "description": text, "parameters": parameters}


_CONFIG_HEADERS = [
    _int_header("X-MQS-MAX-RECEIVES", 1, INT32_MAX, False,
                "Receives before a message moves to the dead letter queue. Must be given "
                "together with X-MQS-DEAD-LETTER-QUEUE (else 400)."),
    {"name": "X-MQS-DEAD-LETTER-QUEUE", "in": "header", "required": False,
     "description": "An existing queue other than this one (else 400). Must be given "
                    "together with X-MQS-MAX-RECEIVES (else 400).",
     "schema": _NAME_SCHEMA},
    _int_header("X-MQS-RETENTION-SECONDS", 1, INT32_MAX, True,
                "How long a message is kept, counted from its first enqueue "
                "(also in a dead letter queue)."),
    _int_header("X-MQS-VISIBILITY-TIMEOUT-SECONDS", 0, INT32_MAX, True,
                "How long a received message stays hidden."),
    _int_header("X-MQS-DELAY-SECONDS", 0, INT32_MAX, False,
                "How long a sent message waits before it becomes visible (default 0)."),
]  # fmt: skip
_MSG_HEADERS = {
    "X-MQS-MESSAGE-COUNT": {"required": True, "schema": _COUNT,
                            "description": "How many messages the answer holds."},
    "X-MQS-MESSAGE-ID": {"schema": _ID_SCHEMA,
                         "description": "Opaque id for DELETE /messages/{message_id} "
                                        "(one message only)."},
    "X-MQS-MESSAGE-RECEIVES": {"schema": _COUNT, "description": "One message only."},
    "X-MQS-MESSAGE-PUBLISHED-AT": {"schema": _DATE_TIME, "description": "One message only."},
    "X-MQS-MESSAGE-VISIBLE-AT": {"schema": _DATE_TIME, "description": "One message only."},
    "X-TRACE-ID": {"schema": {"type": "string"}, "description": "As sent, when it was."},
}  # fmt: skip
_QUEUE_LINKS = {
    "GetQueue": _link("getQueue", "The queue just created", name="$response.body#/name"),
    "UpdateQueue": _link("updateQueue", "Change its settings", name="$response.body#/name"),
    "DeleteQueue": _link("deleteQueue", "Delete it", name="$response.body#/name"),
    "SendMessages": _link("sendMessages", "Send to it", name="$response.body#/name"),
    "ReceiveMessages": _link("receiveMessages", "Receive from it", name="$response.body#/name"),
}


def document() -> dict[str, Any]:
    queue = _ref("schemas", "Queue")
    queue_json = {"application/json": {"schema": queue}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mqs: the mediator's queue API",
            "version": "1.1.0",
            "description": "An SQS-like HTTP queue API on the mediator's queue engine. Every "
            'refusal is JSON `{"error": "..."}`. With MEDIATOR_API_TOKENS set, every operation '
            "needs one of them as a bearer token (else 401 with `WWW-Authenticate: Bearer`); "
            "without, mqs takes no token and is served on loopback only (elsewhere 403). "
            "An unknown path is 404, a method a path does not support 405 with `Allow`.",
        },
        "security": [{"bearer": []}],
        "paths": {
            "/queues": {
                "get": {
                    "operationId": "listQueues",
                    "summary": "List queues in name order",
                    "parameters": [{
                        "name": "Range", "in": "header", "required": False,
                        "description": "queues=a-b, queues=a- or queues=-n (0-based, inclusive; "
                                       "`users` is read as `queues`); empty: no range. A range "
                                       "that selects no queue, or a > b, is 416.",
                        "schema": {"type": "string", "pattern": RANGE_PATTERN},
                    }],
                    "responses": _responses({
                        "200": {
                            "description": "The selected queues (200 also for a range)",
                            "headers": {
                                "Accept-Ranges": {"required": True,
                                                  "schema": {"type": "string", "const": "queues"}},
                                "Content-Range": {
                                    "required": True,
                                    "description": "queues a-b/total, or queues */total",
                                    "schema": {"type": "string", "pattern":
                                               r"^queues ([0-9]+-[0-9]+|\*)/[0-9]+$"}},
                            },
                            "content": {"application/json": {"schema": {
                                "type": "object", "required": ["queues"],
                                "properties": {"queues": {"type": "array", "items": queue}},
                            }}},
                        },
                        "416": _err("The range is malformed or selects no queue", {
                            "Content-Range": {"required": True, "schema": {
                                "type": "string", "pattern": r"^queues \*/[0-9]+$"}}}),
                    }),
                }
            },
            "/queues/{name}": {
                "parameters": [{"name": "name", "in": "path", "required": True,
                                "schema": _NAME_SCHEMA}],
                "put": {
                    "operationId": "createQueue",
                    "summary": "Create a queue",
                    "parameters": _CONFIG_HEADERS,
                    "responses": _responses(
                        {"201": {"description": "Created; the body is the new queue",
                                 "content": queue_json, "links": _QUEUE_LINKS}},
                        s400="A header or the name did not validate, or the dead letter queue "
                             "does not exist",
                        s409="A queue of that name exists (answered before headers are checked)",
                    ),
                },
                "post": {
                    "operationId": "updateQueue",
                    "summary": "Update a queue (hidden messages keep their deadlines)",
                    "parameters": _CONFIG_HEADERS,
                    "responses": _responses(
                        {"200": {"description": "Updated; the body is the queue",
                                 "content": queue_json}},
                        s400="A header or the name did not validate, or the dead letter queue "
                             "does not exist",
                        s404="No such queue (answered before headers are checked)",
                    ),
                },
                "delete": {
                    "operationId": "deleteQueue",
                    "summary": "Delete a queue and its messages",
                    "parameters": [{
                        "name": "X-MQS-CASCADE", "in": "header", "required": False,
                        "description": "true (any case, the default): clear this queue as "
                                       "dead letter queue of others; false: refuse with 412.",
                        "schema": {"type": "string", "pattern": "^[ \t]*([Tt][Rr][Uu][Ee]|"
                                   "[Ff][Aa][Ll][Ss][Ee])[ \t]*$", "default": "true"},
                    }],
                    "responses": _responses(
                        {"200": {"description": "Deleted; the body is the deleted queue",
                                 "content": queue_json,
                                 "links": {"GetQueue": _link(
                                     "getQueue", "Now 404", name="$request.path.name")}}},
                        s400="The name or X-MQS-CASCADE did not validate",
                        s404="No such queue",
                        s412="Another queue uses it as dead letter queue (cascade false)",
                    ),
                },
                "get": {
                    "operationId": "getQueue",
                    "summary": "Get a queue, with its message counts",
                    "responses": _responses(
                        {"200": {"description": "The queue with its `status`",
                                 "content": queue_json}},
                        s400="The name did not validate",
                        s404="No such queue",
                    ),
                },
            },
            "/messages/{name}": {
                "parameters": [{"name": "name", "in": "path", "required": True,
                                "description": "A queue name", "schema": _NAME_SCHEMA}],
                "post": {
                    "operationId": "sendMessages",
                    "summary": "Send one message, or one per part of a multipart/mixed body",
                    "description": "Any body that is not multipart/mixed is one message, stored "
                                   "with its Content-Type, Content-Encoding and X-TRACE-ID. An "
                                   "empty body is an empty message.",
                    "parameters": [
                        {"name": "Content-Encoding", "in": "header", "required": False,
                         "description": "Stored and sent back with the message",
                         "schema": {"type": "string"}},
                        {"name": "X-TRACE-ID", "in": "header", "required": False,
                         "description": "Stored and sent back with the message (the default "
                                        "of each part of a batch)",
                         "schema": {"type": "string"}},
                    ],
                    "requestBody": {"required": False, "content": {
                        "multipart/mixed": {"schema": {
                            "description": "A batch: one message per part, each with its own "
                                           "Content-Type; part names are not used. At least "
                                           "one part, at most MEDIATOR_MAX_BATCH_MESSAGES.",
                            "type": "object", "minProperties": 1,
                            # Part header lines may not hold control characters (but HT).
                            "propertyNames": {"pattern": "^[^\u0000-\u0008\u000a-\u001f\u007f]*$"},
                            "additionalProperties": _BINARY}},
                        "*/*": {"schema": _BINARY},
                    }},
                    "responses": _responses(
                        {"201": {
                            "description": "Stored, all or none; ids in part order",
                            "content": {"application/json": {"schema": {
                                "type": "object", "required": ["messageIds"],
                                "properties": {"messageIds": {
                                    "type": "array", "minItems": 1,
                                    "items": _ID_SCHEMA}}}}},
                            "links": {
                                "ReceiveMessages": _link("receiveMessages", "Receive it",
                                                         name="$request.path.name"),
                                "DeleteMessage": _link("deleteMessage", "Delete the first one",
                                                       message_id="$response.body#/messageIds/0"),
                            }}},
                        s400="The name did not validate, or a malformed multipart body",
                        s404="No such queue",
                        s413="A message or the request is too large, or a queue limit refused "
                             "the send",
                    ),
                },
                "get": {
                    "operationId": "receiveMessages",
                    "summary": "Receive messages: one as the body, a batch as multipart/mixed",
                    "parameters": [
                        _int_header("X-MQS-MAX-MESSAGES", 1, 1000, True,
                                    "1: the message is the body; more: a multipart/mixed batch."),
                        _int_header("X-MQS-WAIT-TIME", 0, 60, False,
                                    "Seconds to wait for a message (long poll)."),
                    ],
                    "responses": _responses(
                        {"200": {
                            "description": "No message: the JSON array `[]`. One message asked "
                                           "for: its body, with its own Content-Type. More: "
                                           "multipart/mixed, one part per message.",
                            "headers": _MSG_HEADERS,
                            "content": {"*/*": {"schema": {}}},
                            "links": {"DeleteMessage": _link(
                                "deleteMessage", "Delete the message received",
                                message_id="$response.header.X-MQS-MESSAGE-ID")},
                        }},
                        s400="The name or a header did not validate",
                        s404="No such queue (answered before headers are checked)",
                    ),
                },
            },
            "/messages/{message_id}": {
                "parameters": [{"name": "message_id", "in": "path", "required": True,
                                "description": "An id from a send or a receive; anything "
                                               "else is 404",
                                "schema": _ID_SCHEMA}],
                "delete": {
                    "operationId": "deleteMessage",
                    "summary": "Delete a message by id (also once it moved to a dead letter queue)",
                    "responses": _responses(
                        {"204": {"description": "Deleted"}},
                        s404="No such message (malformed ids included)",
                    ),
                },
            },
        },
        "components": {
            "securitySchemes": {"bearer": {
                "type": "http", "scheme": "bearer",
                "description": "One of MEDIATOR_API_TOKENS. Nodes without tokens take none."}},
            "responses": {
                "E401": _err("No bearer token, or not one of the node's", {
                    "WWW-Authenticate": {"required": True,
                                         "schema": {"type": "string", "const": "Bearer"}}}),
                "E403": _err("mqs is disabled: no tokens, and not on a loopback address"),
                "E500": _err("An unexpected error (none is expected)"),
                "E503": _err("Storage did not answer; nothing was done, try again"),
                "E507": _err("Storage is full (Redis maxmemory): nothing was written; "
                             "receiving and deleting messages frees room"),
            },
            "schemas": {
                "Error": {"type": "object", "required": ["error"],
                          "properties": {"error": {"type": "string"}}},
                "Queue": {
                    "type": "object",
                    "required": ["name", "deadLetterQueue", "maxReceives", "retentionSeconds",
                                 "visibilityTimeoutSeconds", "delaySeconds"],
                    "properties": {
                        "name": {"type": "string", "pattern": QUEUE_NAME_PATTERN},
                        "deadLetterQueue": {"anyOf": [{"type": "string",
                                                       "pattern": QUEUE_NAME_PATTERN},
                                                      {"type": "null"}]},
                        "maxReceives": {"type": ["integer", "null"],
                                        "minimum": 1, "maximum": INT32_MAX},
                        "retentionSeconds": {"type": "integer", "minimum": 1,
                                             "maximum": INT32_MAX},
                        "visibilityTimeoutSeconds": {"type": "integer", "minimum": 0,
                                                     "maximum": INT32_MAX},
                        "delaySeconds": {"type": "integer", "minimum": 0, "maximum": INT32_MAX},
                        "status": {
                            "description": "Only in GET /queues/{name}",
                            "type": "object",
                            "required": ["messages", "visibleMessages", "inFlightMessages",
                                         "delayedMessages", "oldestMessageAgeSeconds"],
                            "properties": {
                                "messages": {"type": "integer", "minimum": 0},
                                "visibleMessages": {"type": "integer", "minimum": 0},
                                "inFlightMessages": {"type": "integer", "minimum": 0},
                                "delayedMessages": {"type": "integer", "minimum": 0},
                                "oldestMessageAgeSeconds": {"type": "number", "minimum": 0},
                            },
                        },
                    },
                },
            },
        },
    }  # fmt: skip
