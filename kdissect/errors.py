"""kdissect's errors, and the exit status each one means (the README's table of exit codes).

0 is success. Each error is one line on stderr, never a traceback:

* :class:`KdissectError` (exit 1): the command could not do its work (an unwritable OUTDIR, Java or
  tshark missing, a worker that failed).
* :class:`UsageError` (exit 2): bad use, fixed by changing the command line (an unknown option or a
  bad value, an input that does not exist).
* :class:`DamagedInput` (exit 3): an input that is not a capture, or a capture damaged inside (cut
  short, a corrupt record): everything readable is decoded and written first, and the line says
  which file and where.

``kdissect doctor`` exits 1 for a critical finding, so its own failures exit 4.
"""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DAMAGED = 3
EXIT_DOCTOR_FAILED = 4


class KdissectError(Exception):
    """Something the user can fix (unwritable OUTDIR, a missing tool, ...): exit 1.

    The message is one line; the CLI prints it as ``kdissect: <message>`` and
    exits non-zero, without a traceback.
    """

    exit_code = EXIT_FAILED


class UsageError(KdissectError):
    """Bad use: a bad option or value, an input that does not exist: exit 2."""

    exit_code = EXIT_USAGE


class DamagedInput(KdissectError):
    """An input that is not a capture, or a capture damaged inside: exit 3."""

    exit_code = EXIT_DAMAGED
