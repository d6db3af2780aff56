"""The one exception kdissect raises for a user's mistake."""

from __future__ import annotations


class KdissectError(Exception):
    """Something the user can fix (missing input, unwritable OUTDIR, ...).

    The message is one line; the CLI prints it as ``kdissect: <message>`` and
    exits non-zero, without a traceback.
    """
