"""The bulk loader (bench/support/bulk_load.py; bench/README.md):
`python bench/bulk_load.py --redis-url redis://127.0.0.1:6379/0 --recipients 20000`."""

import sys

from bench.support.bulk_load import main

if __name__ == "__main__":
    sys.exit(main())
