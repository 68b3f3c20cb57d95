"""``python -m fp16lab.bench``: the same as ``python -m fp16lab bench``."""

import sys

from fp16lab.bench.cli import main

sys.exit(main())
