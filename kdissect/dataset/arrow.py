"""Importing pyarrow in a process that only writes the dataset.

pyarrow imports numpy whenever it is installed, to convert between Arrow and
numpy arrays: ~80 ms, a third of a small capture's whole decode. A decode never
makes that conversion (:mod:`kdissect.dataset.columns` fills Arrow's buffers itself), so
the ``kdissect decode`` command, which owns its process and ends once the dataset
is written, claims the process (:func:`claim_process`) and pyarrow is then
imported with numpy hidden from it. Nothing else claims it: pyarrow sets up its
numpy bridge once, at import, and a notebook, a Spark task, the tests or
``kdissect doctor`` (which goes on to pandas) need that bridge later.
"""

from __future__ import annotations

import sys

_claimed = False


def claim_process() -> None:
    """This process writes the dataset and exits (its forked workers inherit the claim)."""
    global _claimed
    _claimed = True


def import_pyarrow() -> None:
    """Import pyarrow, and the modules of it a decode uses, as this process wants them."""
    if "pyarrow" in sys.modules:
        return
    if not _claimed or "numpy" in sys.modules:
        import pyarrow  # noqa: F401
        return
    # None in sys.modules makes ``import numpy`` raise ImportError, pyarrow's sign that numpy is
    # not installed. Only for the import: numpy stays importable (the numpy fallbacks of
    # kdissect.dataset.columns, TLS key logs), it is just not bridged to Arrow.
    sys.modules["numpy"] = None  # type: ignore[assignment]
    try:
        import pyarrow  # noqa: F401
        try:
            import pyarrow._parquet  # noqa: F401  (the writer kdissect.dataset.writer uses)
        except ImportError:
            import pyarrow.parquet  # noqa: F401
    finally:
        del sys.modules["numpy"]
