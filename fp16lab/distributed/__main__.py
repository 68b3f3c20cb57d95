"""``python -m fp16lab.distributed bench --out results/``: see :mod:`fp16lab.distributed.cli`."""

import sys

from fp16lab.distributed.cli import main

if __name__ == "__main__":
    sys.exit(main())
