"""`python -m sluiceway_executor` runs `sluiceway executor`."""

import sys

from sluiceway_executor.main import main

sys.exit(main(sys.argv[1:]))
