"""``python -m kdissect`` is the ``kdissect`` command."""

import sys

from kdissect.commands.cli import run

sys.exit(run())
