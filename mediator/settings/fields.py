"""How a section's field becomes a setting the outside can name: one `--<name>` flag, one
`MEDIATOR_<NAME>` variable, and for a secret a `--<name>-file` / `MEDIATOR_<NAME>_FILE` twin.
The name is the section's prefix and the field's (`redis_` + `url`), unless the field names
itself (`lease_seconds` in the worker's section): names never change with the sections."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mediator.errors import ConfigError

if TYPE_CHECKING:
    from mediator.settings import Settings

ENV_PREFIX = "MEDIATOR_"
FILE_SUFFIX = "_file"
SECRET_FILE_HINT = "--…-file or MEDIATOR_…_FILE"

KINDS = ("str", "int", "float", "bool")


def setting(
    default: Any = MISSING,
    help_text: str = "",
    *,
    factory: Callable[[], Any] | None = None,
    scope: str = "all",
    secret: bool = False,
    name: str = "",
    repr: bool = True,
) -> Any:
    """A section's field. `scope`: the commands that offer it (all, or names separated by
    spaces: serve, worker, import). A
    `secret` one is never shown (no default in --help, no repr) and may be read from a file
    instead, as container platforms mount secrets. `name`: its flag's and variable's name,
    when not the section's prefix and the field's."""
    if secret:
        help_text += f" Secret: better given as a file ({SECRET_FILE_HINT})."
    metadata = {"help": help_text, "scope": scope, "secret": secret, "name": name}
    shown = repr and not secret
    if factory is not None:
        return dataclasses.field(default_factory=factory, repr=shown, metadata=metadata)
    return dataclasses.field(default=default, repr=shown, metadata=metadata)


@dataclass(frozen=True)
class Setting:
    """One setting as the outside names it, and where it lives in the settings object."""

    name: str  # redis_url: --redis-url, MEDIATOR_REDIS_URL
    section: str  # redis: the Settings attribute
    attr: str  # url: the section's attribute
    kind: str  # str, int, float or bool
    help: str
    scope: str
    secret: bool
    field: dataclasses.Field[Any] = dataclasses.field(repr=False, compare=False)

    @property
    def default(self) -> Any:
        factory = self.field.default_factory
        return factory() if callable(factory) else self.field.default

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return env_name(self.name)

    def value(self, settings: Settings) -> Any:
        """Its value in a Settings object."""
        return getattr(getattr(settings, self.section), self.attr)


def section_settings(section: str, cls: type[Any]) -> list[Setting]:
    """The settings of one section class, in its fields' order."""
    prefix: str = getattr(cls, "PREFIX", "")
    out = []
    for f in dataclasses.fields(cls):
        kind = str(f.type)
        if kind not in KINDS:
            raise TypeError(f"{cls.__name__}.{f.name}: a setting is one of {KINDS}, not {kind}")
        out.append(
            Setting(
                name=f.metadata["name"] or prefix + f.name,
                section=section,
                attr=f.name,
                kind=kind,
                help=f.metadata["help"],
                scope=f.metadata["scope"],
                secret=f.metadata["secret"],
                field=f,
            )
        )
    return out


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off", ""}


def convert(setting: Setting, raw: str) -> Any:
    """A variable's text as the setting's type; a ConfigError that names the variable."""
    try:
        if setting.kind == "bool":
            word = raw.strip().lower()
            if word not in _TRUE | _FALSE:
                raise ValueError(raw)
            return word in _TRUE
        if setting.kind == "int":
            return int(raw)
        if setting.kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigError(f"{setting.env}={raw!r} is not a valid {setting.kind}") from None
    return raw


def read_secret_files(values: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """`values` with each secret that `files` names (name -> path) read from its file:
    the whole file, without the line break editors and `echo` leave at its end."""
    out = dict(values)
    for name, path in files.items():
        if values.get(name):
            raise ConfigError(
                f"{env_name(name)} and {env_name(name + FILE_SUFFIX)} are both given: use one"
            )
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {env_name(name + FILE_SUFFIX)}: {exc}") from None
        text = text.removesuffix("\n").removesuffix("\r")
        if not text.strip():
            raise ConfigError(f"{env_name(name + FILE_SUFFIX)} names an empty file ({path})")
        out[name] = text
    return out
