"""The hot path's C helpers (``_speedups.pyx``) or, when kdissect runs as Python, their pure twins
(``_speedups_pure.py``): chosen here, once, for every module that imports them.

As Python means what it means for the rest of the hot path (``hotpath.runs_as_python``): a compiled
``_speedups`` beside modules loaded from source would make a run half one build, half the other.
Compiled callers never come here: their ``.pxd`` cimports the C functions from ``_speedups``.
"""
from __future__ import annotations

from hotpath import switched_to_python

if switched_to_python():
    from hotpath._speedups_pure import (SUMMARY_KEYS, clear_keeping_capacity, crc32c_of, find, plain_json,
                                        reserve_list, summary_json)
else:
    try:
        from hotpath._speedups import (SUMMARY_KEYS, clear_keeping_capacity, crc32c_of, find,  # type: ignore
                                       plain_json, reserve_list, summary_json)
    except ImportError:         # not compiled (no compiler at install)
        from hotpath._speedups_pure import (SUMMARY_KEYS, clear_keeping_capacity, crc32c_of, find, plain_json,
                                            reserve_list, summary_json)

__all__ = ["SUMMARY_KEYS", "clear_keeping_capacity", "crc32c_of", "find", "plain_json", "reserve_list", "summary_json"]
