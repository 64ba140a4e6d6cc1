"""`mediator import` at a million wallets: `python bench/import_bench.py --help`.

The code is bench/workloads/imports.py; bench/README.md describes the figures."""

import sys

from bench.workloads.imports import main

if __name__ == "__main__":
    sys.exit(main())
