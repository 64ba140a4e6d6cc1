"""The DIDComm benchmark: `python bench/didcomm_bench.py --help`.

The code is bench/workloads/didcomm.py; bench/README.md describes the figures."""

import sys

from bench.workloads.didcomm import main

if __name__ == "__main__":
    sys.exit(main())
