"""``python -m harness.cli``: the ``harness`` command without the extra check of
:mod:`harness._launch`."""

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
