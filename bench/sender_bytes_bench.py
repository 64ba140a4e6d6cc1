"""What counting a sender's queued bytes costs Redis: `python bench/sender_bytes_bench.py --help`.

The code is bench/workloads/sender_bytes.py; bench/README.md describes the figures."""

import sys

from bench.workloads.sender_bytes import main

if __name__ == "__main__":
    sys.exit(main())
