"""The return codes each script's header names are the ones its decoder knows: a header line
`--   NAME = value` under `codes replies.<Enum>` is a member of that enum, and every member
of every enum is named by some header."""

from __future__ import annotations

import re
from enum import IntEnum
from importlib import resources

from mediator.engine import replies
from mediator.engine.scripts import NAMES

CODES = re.compile(r"codes replies\.(\w+)")
CODE_LINE = re.compile(r"^--\s+([A-Z][A-Z_]*) = (-?\d+)\b")


def _header(name: str) -> list[str]:
    text = (resources.files("mediator.engine") / "lua" / f"{name}.lua").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#!")]
    out = []
    for line in lines:
        if not line.startswith("--"):
            break
        out.append(line)
    return out


def test_headers_name_the_decoders_codes() -> None:
    named: dict[str, set[tuple[str, int]]] = {}
    for name in NAMES:
        header = _header(name)
        enums = [m.group(1) for line in header for m in CODES.finditer(line)]
        listed = {(m.group(1), int(m.group(2))) for line in header if (m := CODE_LINE.match(line))}
        if not enums:
            assert not listed, f"{name}.lua names codes without their enum"
            continue
        members = set()
        for enum_name in enums:
            enum = getattr(replies, enum_name)
            assert issubclass(enum, IntEnum), enum_name
            members |= {(m.name, m.value) for m in enum}
            named.setdefault(enum_name, set())
        assert listed <= members, (name, listed - members)
        for enum_name in enums:
            enum = getattr(replies, enum_name)
            named[enum_name] |= listed & {(m.name, m.value) for m in enum}
    enums = {
        n: e for n, e in vars(replies).items() if isinstance(e, type) and issubclass(e, IntEnum)
    }
    for enum_name, enum in enums.items():
        if enum is IntEnum:
            continue
        assert named.get(enum_name) == {(m.name, m.value) for m in enum}, enum_name
