"""The settings as command-line options, for `mediator`'s commands and those that plug in
(mediator/plugins.py): one click option per settings field of a command's scope, its
`MEDIATOR_<NAME>` twin, default and help taken from the field."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from mediator.errors import ConfigError
from mediator.settings import (
    FILE_SUFFIX,
    Settings,
    env_name,
    read_secret_files,
    secret_fields,
    settings_fields,
)


def settings_options(scope: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One click option per settings field of this scope, default and help from the field."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for f in reversed(settings_fields(scope)):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            flag = "--" + f.name.replace("_", "-")
            kwargs: dict[str, Any] = {
                "envvar": env_name(f.name),
                "default": default,
                "show_default": not f.metadata["secret"],
                "show_envvar": True,
                "help": f.metadata["help"],
            }
            if f.metadata["secret"]:
                func = click.option(
                    flag + "-file",
                    f.name + FILE_SUFFIX,
                    envvar=env_name(f.name + FILE_SUFFIX),
                    type=click.Path(dir_okay=False),
                    show_envvar=True,
                    help=f"A file holding --{f.name.replace('_', '-')} (a mounted secret).",
                )(func)
            if f.type in (bool, "bool"):
                name = f.name.replace("_", "-")
                func = click.option(f"--{name}/--no-{name}", f.name, **kwargs)(func)
            else:
                kind = {"int": int, "float": float, "str": str}[str(f.type)]
                func = click.option(flag, f.name, type=kind, **kwargs)(func)
        return func

    return decorate


def build_settings(options: dict[str, Any]) -> Settings:
    """The settings from a command's options (secret files read); a bad value is a usage
    error, said as such."""
    names = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in options.items() if k in names}
    files = {
        f.name: options[f.name + FILE_SUFFIX]
        for f in secret_fields()
        if options.get(f.name + FILE_SUFFIX)
    }
    try:
        return Settings(**read_secret_files(values, files))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def fail(exc: Exception | str, code: int = 2) -> NoReturn:
    """End a command with one `error:` line."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(code)
