"""The capacity benchmark: `python bench/capacity_bench.py --help`.

The code is bench/workloads/capacity.py; bench/README.md describes the figures."""

import sys

from bench.workloads.capacity import main

if __name__ == "__main__":
    sys.exit(main())
