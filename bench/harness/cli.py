"""The command-line arguments the benchmarks share: the blocks (--seconds, --pairs,
--warmup, --pause, --connections), the parts to run (--only), where processes run and what is
kept (--no-pin, --keep-tmp, --output-dir), --profile, --redis-url and the bulk-loaded data
set (--recipients, --share). Each benchmark adds its own and its --quick presets."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"  # bench/results, git-ignored


def new_parser(doc: str, epilog: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog
    )


def add_blocks(
    parser: argparse.ArgumentParser,
    *,
    seconds: float = 4.0,
    pairs: int = 3,
    warmup: float = 2.0,
    seconds_help: str = "length of one measured block",
    pairs_help: str = "anchor/subject block pairs per workload",
    warmup_help: str = "warm-up block length per side",
    connections_help: str = "concurrent keep-alive connections of the load generator",
) -> None:
    """--seconds, --pairs, --warmup, --pause and --connections, with these defaults."""
    add = parser.add_argument
    add("--seconds", type=float, default=seconds, help=f"{seconds_help} (default {seconds:g})")
    add("--pairs", type=int, default=pairs, help=f"{pairs_help} (default {pairs})")
    add("--warmup", type=float, default=warmup, help=f"{warmup_help} (default {warmup:g})")
    add("--pause", type=float, default=0.3, help="idle seconds between blocks (default 0.3)")
    add("--connections", type=int, default=32, help=f"{connections_help} (default 32)")


def check_blocks(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The bounds every benchmark keeps its blocks within."""
    if not (0.1 <= args.seconds <= 120 and 1 <= args.pairs <= 50 and 0 <= args.warmup <= 120):
        parser.error("--seconds must be 0.1..120, --pairs 1..50, --warmup 0..120")
    if not (1 <= args.connections <= 512 and 0 <= args.pause <= 60):
        parser.error("--connections must be 1..512 and --pause 0..60")


def add_run(
    parser: argparse.ArgumentParser,
    kind: str,
    *,
    no_pin_help: str = "do not pin processes to CPUs with taskset",
    keep_tmp_help: str = "keep the temporary folder (server logs, Redis data and log)",
) -> None:
    """--no-pin, --keep-tmp and --output-dir (where <kind>-<timestamp>.json goes)."""
    add = parser.add_argument
    add("--no-pin", action="store_true", help=no_pin_help)
    add("--keep-tmp", action="store_true", help=keep_tmp_help)
    add(
        "--output-dir",
        default=str(RESULTS),
        help=f"where {kind}-<timestamp>.json goes (default bench/results)",
    )


def add_only(parser: argparse.ArgumentParser, names: Sequence[str], note: str = "") -> None:
    parser.add_argument(
        "--only",
        default=",".join(names),
        help=f"comma-separated parts to run, in this order (default all: {','.join(names)})"
        + (f"; {note}" if note else ""),
    )


def parse_only(parser: argparse.ArgumentParser, text: str, names: Sequence[str]) -> set[str]:
    """The parts --only names, refusing unknown ones."""
    only = {w.strip() for w in text.split(",") if w.strip()}
    if only - set(names):
        parser.error(f"unknown parts {sorted(only - set(names))}; choose from {list(names)}")
    return only


def add_profile(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--profile", action="store_true", help=what)


def add_redis_url(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--redis-url", default="", help=what)


def add_plan(parser: argparse.ArgumentParser) -> None:
    """The bulk-loaded data set: --recipients and --share."""
    add = parser.add_argument
    add("--recipients", type=int, default=1_000_000, help="recipients loaded (1000000)")
    add(
        "--share",
        type=float,
        default=0.1,
        help="share of recipients with 1-5 queued 1 KiB messages (0.1)",
    )


def check_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not (100 <= args.recipients <= 10_000_000 and 0 <= args.share <= 1):
        parser.error("--recipients must be 100..10000000 and --share 0..1")
