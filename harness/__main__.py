"""``python -m harness``: the same as the ``harness`` command."""

import sys

from harness._launch import main

if __name__ == "__main__":
    sys.exit(main())
