"""The node's allocator settings (mediator/ops/allocator.py): applied on glibc, and left to
the operator when any MALLOC_ variable is set."""

from __future__ import annotations

import os
import platform

import pytest

from mediator.ops import allocator


@pytest.mark.full
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's settings are glibc's")
def test_the_settings_apply_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("MALLOC_")]:
        monkeypatch.delenv(name)
    assert allocator.tune() is True


def test_an_operators_malloc_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert allocator.tune() is False
