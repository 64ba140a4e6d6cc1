"""Tools without settings flags of their own (the capacity jobs) read the same MEDIATOR_*
variables as `mediator serve`, with the same types and defaults."""

from __future__ import annotations

import pytest

from mediator.errors import ConfigError
from mediator.settings import Settings


def test_variables_give_the_settings_a_node_would_have() -> None:
    seed = "ab9c1e2f3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f"
    settings = Settings.from_environment(
        {
            "MEDIATOR_KEY_SEED": seed,
            "MEDIATOR_QUEUE_DURATION_LIMIT": "86400",
            "MEDIATOR_IN_PROCESS_WORKER": "false",
            "MEDIATOR_DRAIN_SECONDS": "7.5",
            "OTHER_VARIABLE": "ignored",
        }
    )
    assert settings.key_seed == seed
    assert settings.queue_duration_limit == 86400
    assert settings.in_process_worker is False
    assert settings.drain_seconds == 7.5
    assert Settings.from_environment({}) == Settings()


@pytest.mark.parametrize(
    ("name", "raw"),
    [("MEDIATOR_QUEUE_DURATION_LIMIT", "a month"), ("MEDIATOR_IN_PROCESS_WORKER", "maybe")],
)
def test_a_malformed_variable_says_which_and_why(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}='{raw}' is not a valid"):
        Settings.from_environment({name: raw})
