"""``python -m kdissect`` is the ``kdissect`` command."""

import sys

from kdissect.cli import run

sys.exit(run())
