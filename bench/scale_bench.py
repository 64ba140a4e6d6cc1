"""The scale benchmark: `python bench/scale_bench.py --help`.

The code is bench/workloads/scale.py; bench/README.md describes the figures."""

import sys

from bench.workloads.scale import main

if __name__ == "__main__":
    sys.exit(main())
