"""The OpenAPI 3.1 document of the mqs API, served at /openapi.json."""

from __future__ import annotations

from typing import Any

_ERR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def _int_header(name: str, low: int, high: int, required: bool, text: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": required,
        "description": text,
        "schema": {"type": "integer", "minimum": low, "maximum": high},
    }


def _err(text: str) -> dict[str, Any]:
    return {"description": text, "content": _ERR}


INT32_MAX = 2**31 - 1
_QUEUE_NAME = {"name": "name", "in": "path", "required": True,
               "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,80}$"}}  # fmt: skip
_CONFIG_HEADERS = [
    _int_header("X-MQS-MAX-RECEIVES", 1, INT32_MAX, False,
                "Receives before a message moves to the dead letter queue; "
                "needs X-MQS-DEAD-LETTER-QUEUE."),
    {"name": "X-MQS-DEAD-LETTER-QUEUE", "in": "header", "required": False,
     "description": "An existing queue, not this one; needs X-MQS-MAX-RECEIVES.",
     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,80}$"}},
    _int_header("X-MQS-RETENTION-SECONDS", 1, INT32_MAX, True,
                "How long a message is kept, counted from its first enqueue "
                "(also in a dead letter queue)."),
    _int_header("X-MQS-VISIBILITY-TIMEOUT-SECONDS", 0, INT32_MAX, True,
                "How long a received message stays hidden."),
    _int_header("X-MQS-DELAY-SECONDS", 0, INT32_MAX, False,
                "How long a sent message waits before it becomes visible."),
]  # fmt: skip
_MSG_HEADERS = {
    "X-MQS-MESSAGE-ID": {"schema": {"type": "string"}, "description": "Opaque id for DELETE."},
    "X-MQS-MESSAGE-RECEIVES": {"schema": {"type": "integer"}},
    "X-MQS-MESSAGE-PUBLISHED-AT": {"schema": {"type": "string", "format": "date-time"}},
    "X-MQS-MESSAGE-VISIBLE-AT": {"schema": {"type": "string", "format": "date-time"}},
    "X-MQS-MESSAGE-COUNT": {"schema": {"type": "integer"}},
}
_BINARY = {"type": "string", "format": "binary"}
_AUTH: list[dict[str, list[str]]] = [{"bearer": []}]


def document() -> dict[str, Any]:
    queue_ref = {"$ref": "#/components/schemas/Queue"}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mqs: the mediator's queue API",
            "version": "1.0.0",
            "description": "An SQS-like HTTP queue API on the mediator's queue engine. Errors are "
            '`{"error": "..."}`. Without configured tokens it is served on loopback only.',
        },
        "security": _AUTH,
        "paths": {
            "/queues": {
                "get": {
                    "summary": "List queues in name order",
                    "parameters": [{
                        "name": "Range", "in": "header", "required": False,
                        "description": "queues=a-b, queues=a- or queues=-n (0-based, inclusive)",
                        "schema": {"type": "string"},
                    }],
                    "responses": {
                        "200": {
                            "description": "Queues",
                            "headers": {
                                "Accept-Ranges": {"schema": {"type": "string", "const": "queues"}},
                                "Content-Range": {"schema": {"type": "string"}},
                            },
                            "content": {"application/json": {"schema": {
                                "type": "object",
                                "properties": {"queues": {"type": "array", "items": queue_ref}},
                            }}},
                        },
                        "416": _err("The range cannot be satisfied"),
                    },
                }
            },
            "/queues/{name}": {
                "parameters": [_QUEUE_NAME],
                "put": {
                    "summary": "Create a queue",
                    "parameters": _CONFIG_HEADERS,
                    "responses": {
                        "201": {"description": "Created",
                                "content": {"application/json": {"schema": queue_ref}}},
                        "400": _err("A parameter did not validate"),
                        "409": _err("A queue of that name exists"),
                    },
                },
                "post": {
                    "summary": "Update a queue (hidden messages keep their deadlines)",
                    "parameters": _CONFIG_HEADERS,
                    "responses": {
                        "200": {"description": "Updated",
                                "content": {"application/json": {"schema": queue_ref}}},
                        "400": _err("A parameter did not validate"),
                        "404": _err("No such queue"),
                    },
                },
                "delete": {
                    "summary": "Delete a queue and its messages",
                    "parameters": [{"name": "X-MQS-CASCADE", "in": "header", "required": False,
                                    "schema": {"type": "string", "enum": ["true", "false"],
                                               "default": "true"}}],
                    "responses": {
                        "200": {"description": "Deleted; the body is the deleted queue",
                                "content": {"application/json": {"schema": queue_ref}}},
                        "400": _err("X-MQS-CASCADE is not true or false"),
                        "404": _err("No such queue"),
                        "412": _err("Another queue uses it as dead letter queue (cascade false)"),
                    },
                },
                "get": {
                    "summary": "Get a queue, with its message counts",
                    "responses": {
                        "200": {"description": "The queue",
                                "content": {"application/json": {"schema": queue_ref}}},
                        "404": _err("No such queue"),
                    },
                },
            },
            "/messages/{name}": {
                "parameters": [_QUEUE_NAME],
                "post": {
                    "summary": "Send one message, or one per part of a multipart/mixed body",
                    "requestBody": {"required": True, "content": {
                        "multipart/mixed": {"schema": {"type": "string", "format": "binary"}},
                        "*/*": {"schema": {"type": "string", "format": "binary"}},
                    }},
                    "responses": {
                        "201": {"description": "Stored", "content": {"application/json": {
                            "schema": {"type": "object", "properties": {
                                "messageIds": {"type": "array", "items": {"type": "string"}}}}}}},
                        "400": _err("Malformed multipart body"),
                        "404": _err("No such queue"),
                        "413": _err("A message or the request is too large"),
                    },
                },
                "get": {
                    "summary": "Receive messages: one as the body, a batch as multipart/mixed",
                    "parameters": [
                        _int_header("X-MQS-MAX-MESSAGES", 1, 1000, True,
                                    "1: the message is the body; more: a multipart/mixed batch."),
                        _int_header("X-MQS-WAIT-TIME", 0, 60, False,
                                    "Seconds to wait for a message (long poll)."),
                    ],
                    "responses": {
                        "200": {
                            "description": "Messages; an empty JSON array when there are none",
                            "headers": _MSG_HEADERS,
                            "content": {
                                "multipart/mixed": {"schema": _BINARY},
                                "*/*": {"schema": _BINARY},
                            },
                        },
                        "400": _err("A header did not validate"),
                        "404": _err("No such queue"),
                    },
                },
            },
            "/messages/{message_id}": {
                "parameters": [{"name": "message_id", "in": "path", "required": True,
                                "schema": {"type": "string"}}],
                "delete": {
                    "summary": "Delete a message by id (also once it moved to a dead letter queue)",
                    "responses": {"204": {"description": "Deleted"},
                                  "404": _err("No such message")},
                },
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"],
                          "properties": {"error": {"type": "string"}}},
                "Queue": {
                    "type": "object",
                    "required": ["name", "deadLetterQueue", "maxReceives", "retentionSeconds",
                                 "visibilityTimeoutSeconds", "delaySeconds"],
                    "properties": {
                        "name": {"type": "string"},
                        "deadLetterQueue": {"type": ["string", "null"]},
                        "maxReceives": {"type": ["integer", "null"]},
                        "retentionSeconds": {"type": "integer"},
                        "visibilityTimeoutSeconds": {"type": "integer"},
                        "delaySeconds": {"type": "integer"},
                        "status": {"type": "object"},
                    },
                },
            },
        },
    }  # fmt: skip
