"""``python -m harness.proxy``: ``harness proxy`` without importing the rest of the harness."""

import sys

from harness.proxy.server import main

if __name__ == "__main__":
    sys.exit(main())
