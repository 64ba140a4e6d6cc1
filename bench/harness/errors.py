"""The benchmarks' one error: something failed, so the run cannot give figures (exit 2)."""

from __future__ import annotations


class BenchError(Exception):
    """Something failed: the run cannot give figures."""
