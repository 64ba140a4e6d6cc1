"""Spark's and the JVM's exceptions, said in one line: what failed, not a stack trace."""

from __future__ import annotations

import re

_PYTHON_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def explain(error: BaseException) -> str | None:
    """A readable line for an error raised by Spark, the JVM or a Spark worker; None when
    it is none of those (a bug of ours, whose trace should be seen)."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ModuleNotFoundError:
        return None
    if isinstance(error, PySparkException):
        text = str(error)
        worker = _last_python_error(text)
        if worker:
            return f"a Spark task failed: {worker}"
        first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
        return f"Spark: {first}"
    if isinstance(error, Py4JError):
        text = str(error)
        cause = re.findall(r"(?:Caused by: )?([\w.]+(?:Exception|Error)): ([^\n]+)", text)
        if cause:
            name, message = cause[-1]
            return f"Spark (JVM): {name.rsplit('.', 1)[-1]}: {message.strip()}"
        return f"Spark (JVM): {text.strip().splitlines()[0]}"
    return None


def _last_python_error(text: str) -> str | None:
    """The last `SomeError: message` line of a worker's Python traceback."""
    if "Traceback" not in text:
        return None
    found = _PYTHON_ERROR.findall(text)
    if not found:
        return None
    name, message = found[-1]
    return f"{name}: {message.strip()}"
