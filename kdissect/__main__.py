"""``python -m kdissect`` is the ``kdissect`` command."""

import sys

from kdissect.cli import main

sys.exit(main())
