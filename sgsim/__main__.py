"""``python -m sgsim``: the ``sgsim`` command, for environments without the console script."""

import sys

from sgsim.cli import main

sys.exit(main())
