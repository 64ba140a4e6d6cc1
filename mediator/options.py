"""The settings as command-line options, for `mediator`'s commands and those that plug in
(mediator/plugins.py): one click option per setting of a command's scope, its
`MEDIATOR_<NAME>` twin, default and help taken from the setting's field."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from mediator.errors import ConfigError
from mediator.settings import (
    FILE_SUFFIX,
    Settings,
    all_settings,
    env_name,
    read_secret_files,
    secret_fields,
    settings_fields,
)


def settings_options(scope: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One click option per setting of this scope, default and help from its field."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for s in reversed(settings_fields(scope)):
            kwargs: dict[str, Any] = {
                "envvar": s.env,
                "default": s.default,
                "show_default": not s.secret,
                "show_envvar": True,
                "help": s.help,
            }
            if s.secret:
                func = click.option(
                    s.flag + "-file",
                    s.name + FILE_SUFFIX,
                    envvar=env_name(s.name + FILE_SUFFIX),
                    type=click.Path(dir_okay=False),
                    show_envvar=True,
                    help=f"A file holding {s.flag} (a mounted secret).",
                )(func)
            if s.kind == "bool":
                func = click.option(f"{s.flag}/--no-{s.flag[2:]}", s.name, **kwargs)(func)
            else:
                kind = {"int": int, "float": float, "str": str}[s.kind]
                func = click.option(s.flag, s.name, type=kind, **kwargs)(func)
        return func

    return decorate


def build_settings(options: dict[str, Any]) -> Settings:
    """The settings from a command's options (secret files read); a bad value is a usage
    error, said as such."""
    names = {s.name for s in all_settings()}
    values = {k: v for k, v in options.items() if k in names}
    files = {
        s.name: options[s.name + FILE_SUFFIX]
        for s in secret_fields()
        if options.get(s.name + FILE_SUFFIX)
    }
    try:
        return Settings.of(**read_secret_files(values, files))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def fail(exc: Exception | str, code: int = 2) -> NoReturn:
    """End a command with one `error:` line."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(code)
