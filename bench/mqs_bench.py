"""The mqs benchmark: `python bench/mqs_bench.py --help`.

The code is bench/workloads/mqs.py; bench/README.md describes the figures."""

import sys

from bench.workloads.mqs import main

if __name__ == "__main__":
    sys.exit(main())
