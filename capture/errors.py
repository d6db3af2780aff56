"""The one exception capture raises to its caller."""

from __future__ import annotations


class CaptureError(Exception):
    """The input cannot be read at all (not a capture file, no privilege, ...).

    The message is one line meant to be printed as is, without a traceback.
    Damage *inside* a readable capture is not an error: it is reported as an
    anomaly and everything readable is still delivered.
    """
