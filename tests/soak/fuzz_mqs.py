"""schemathesis against a running node's mqs API, for soaks: `run(base_url, token, inputs, seed)`.

Every phase (examples, coverage, fuzzing with positive and negative data, the stateful
phase over the document's links) with every built-in check, in chunks of about CHUNK
generated requests, each chunk a fresh engine run with its own seed so memory stays bounded.
Findings are counted and each distinct one is printed once to stderr; nothing is raised.

`config()` is also what tests/test_mqs_openapi.py runs with: the few allowances in it are the
places where a schema-valid request is refused for a reason OpenAPI cannot state.
"""

from __future__ import annotations

import ast
import sys
import threading
from collections.abc import Iterator
from typing import Any


def _serialize_ast_parsing() -> None:
    """schemathesis builds strategies in the calling thread while its worker thread runs
    Hypothesis, and both parse source into ASTs (Hypothesis reads filters and composites).
    CPython before 3.11.8 shares one recursion counter between concurrent AST conversions,
    and a garbage collection that switches threads in the middle of one fails it with
    "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905). On
    those versions, one thread parses at a time."""
    if sys.version_info >= (3, 11, 8) or getattr(ast.parse, "serialized", False):
        return
    lock = threading.RLock()
    parse = ast.parse

    def serialized(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return parse(*args, **kwargs)

    serialized.serialized = True  # type: ignore[attr-defined]
    ast.parse = serialized


_serialize_ast_parsing()

CHUNK = 2_000
PHASES = ("examples", "coverage", "fuzzing", "stateful")
# `X-MQS-WAIT-TIME` up to 60 s is valid; a long poll on an empty queue would hold a worker for
# that long, so valid waits over this are sent as this (invalid ones are left as generated).
MAX_WAIT_SECONDS = 1

# A schema-valid create or update can be refused with 400 for rules across headers or state:
# X-MQS-DEAD-LETTER-QUEUE and X-MQS-MAX-RECEIVES only together, the dead letter queue must exist
# and must not be the queue itself. `Range` is 416 when it selects no queue (depends on state).
_POSITIVE_OK = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
_NEGATIVE_OK = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5xx"]
# The spec answers 409 for an existing queue before it looks at the headers.
_MISSING_HEADER_OK = ["400", "401", "403", "406", "415", "422"]


def config(
    token: str,
    *,
    seed: int,
    max_examples: int,
    phases: tuple[str, ...] = PHASES,
    max_steps: int = 20,
    workers: int = 1,
) -> Any:
    """The schemathesis configuration for mqs: all checks, both generation modes, the token."""
    from schemathesis import Config

    return Config.from_dict(
        {
            "seed": seed,
            "workers": workers,
            "auth": {"openapi": {"bearer": {"bearer": token}}},
            "request-timeout": 30,
            "generation": {
                "mode": "all",
                "max-examples": max_examples,
                "deterministic": True,
                # Unknown headers are not an error in HTTP: proxies and clients add their own.
                "allow-extra-parameters": False,
                "database": "none",
            },
            "checks": {"enabled": True},
            "phases": {
                **{name: {"enabled": name in phases} for name in PHASES},
                "stateful": {"enabled": "stateful" in phases, "max-steps": max_steps},
            },
            "operations": [
                {
                    "include-operation-id": "createQueue",
                    "checks": {
                        "positive_data_acceptance": {"expected-statuses": [*_POSITIVE_OK, "400"]},
                        "missing_required_header": {
                            "expected-statuses": [*_MISSING_HEADER_OK, "409"]
                        },
                    },
                },
                {
                    "include-operation-id": "updateQueue",
                    "checks": {
                        "positive_data_acceptance": {"expected-statuses": [*_POSITIVE_OK, "400"]}
                    },
                },
                {
                    "include-operation-id": "listQueues",
                    "checks": {
                        "positive_data_acceptance": {"expected-statuses": [*_POSITIVE_OK, "416"]},
                        # The spec's answer to a Range it cannot serve, malformed ones included.
                        "negative_data_rejection": {"expected-statuses": [*_NEGATIVE_OK, "416"]},
                    },
                },
            ],
        }
    )


def load(
    base_url: str,
    token: str,
    *,
    seed: int,
    max_examples: int,
    phases: tuple[str, ...] = PHASES,
    **kwargs: Any,
) -> Any:
    """The node's OpenAPI document as a schemathesis schema, with the long-poll cap hooked in."""
    import schemathesis

    cfg = config(token, seed=seed, max_examples=max_examples, phases=phases, **kwargs)
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=cfg)
    schema.config.base_url = base_url
    schema.hook("map_case")(shape_case)
    return schema


def shape_case(context: Any, case: Any) -> Any:
    """The `map_case` hook (every phase applies it) that keeps valid long polls short, and
    sends a non-object multipart/mixed body (a negative case) as multipart/mixed: schemathesis
    would send it as multipart/form-data, one plain message under `*/*`, which mqs must take."""
    from schemathesis.core import NotSet

    headers = case.headers or {}
    for name in list(headers):
        if name.lower() != "x-mqs-wait-time":
            continue
        try:
            wait = int(str(headers[name]))
        except ValueError:
            continue
        if MAX_WAIT_SECONDS < wait <= 60:
            headers[name] = type(headers[name])(MAX_WAIT_SECONDS)
    media_type = (case.media_type or "").lower()
    body = case.body
    if media_type.startswith("multipart/mixed") and not isinstance(body, (dict, bytes, NotSet)):
        case.body = str(body).encode()
        case.headers = {**headers, "Content-Type": "multipart/mixed; boundary=mqs-fuzz"}
    return case


def run(base_url: str, token: str, inputs: int, seed: int) -> dict[str, int]:
    """About `inputs` requests of every phase against the node; counts of what was found."""
    totals = _zero()
    seen: set[str] = set()
    chunk = 0
    while totals["inputs"] < inputs:
        before = totals["inputs"]
        # Per chunk: max_examples per operation and phase; 8 operations, ~4 phases.
        max_examples = max(1, min(CHUNK, inputs - before) // 32)
        try:
            schema = load(base_url, token, seed=seed + chunk, max_examples=max_examples)
        except Exception as exc:  # the node is not answering: count it, do not raise
            totals["errors"] += 1
            _report(seen, totals, f"cannot load the document: {exc!r}"[:300])
            break
        if not execute(schema, totals, seen):
            break
        chunk += 1
        totals["chunks"] = chunk
        if totals["inputs"] == before:  # nothing was sent: the node is gone
            _report(seen, totals, f"no request was made in chunk {chunk}; stopping")
            break
    return totals


def _zero() -> dict[str, int]:
    keys = ("inputs", "5xx", "failures", "errors", "chunks", "distinct", "multipart", "stateful")
    return dict.fromkeys(keys, 0)


def execute(
    schema: Any, totals: dict[str, int] | None = None, seen: set[str] | None = None
) -> dict[str, int]:
    """One engine run of `schema`, added to `totals` (and returned); findings go to stderr once
    each, their lines into `seen`. An empty result means a fatal engine error."""
    from schemathesis.engine import events, from_schema
    from schemathesis.engine.run import PhaseName

    totals = _zero() if totals is None else totals
    seen = set() if seen is None else seen
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            _count(event, totals, seen, stateful=event.phase == PhaseName.STATEFUL_TESTING)
        elif isinstance(event, events.NonFatalError):
            totals["errors"] += 1
            info = event.info
            _report(seen, totals, f"error: {event.label}: {info.title}", info.message[:300])
        elif isinstance(event, events.FatalError):
            totals["errors"] += 1
            _report(seen, totals, f"fatal: {event.exception!r}"[:300])
            return {}
    return totals


def _count(event: Any, totals: dict[str, int], seen: set[str], *, stateful: bool) -> None:
    for interaction in _interactions(event):
        totals["inputs"] += 1
        totals["stateful"] += stateful
        sent = interaction.request.headers.items()
        if any(k.lower() == "content-type" and "multipart/mixed" in str(v) for k, v in sent):
            totals["multipart"] += 1
        response = interaction.response
        if response is not None:
            # e.g. "DELETE 204": only a message delete answers that
            answer = f"{interaction.request.method} {response.status_code}"
            totals[answer] = totals.get(answer, 0) + 1
            totals["5xx"] += response.status_code >= 500
    for check in _failed_checks(event):
        totals["failures"] += 1
        failure = check.failure_info.failure if check.failure_info else None
        title = getattr(failure, "title", "") or check.name
        operation = getattr(failure, "operation", "")
        message = " ".join(str(getattr(failure, "message", "")).split())[:240]
        curl = check.failure_info.code_sample if check.failure_info else ""
        detail = f"{message} | {' '.join(curl.split())[:400]}"
        _report(seen, totals, f"{check.name}: {operation}: {title}", detail)


def _interactions(event: Any) -> Iterator[Any]:
    yield from event.recorder.interactions.values()


def _failed_checks(event: Any) -> Iterator[Any]:
    from schemathesis.engine import Status

    for checks in event.recorder.checks.values():
        for check in checks:
            if check.status == Status.FAILURE:
                yield check


def _report(seen: set[str], totals: dict[str, int], key: str, detail: str = "") -> None:
    """One stderr line per distinct finding (the kind, where), with the first one's detail."""
    if key in seen:
        return
    seen.add(key)
    totals["distinct"] = len(seen)
    print(f"fuzz_mqs: {key}" + (f" ({detail})" if detail else ""), file=sys.stderr)
