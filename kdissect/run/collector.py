"""The garbage collector held back while a capture is decoded, by every driver (one process or workers)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often while decoding.

    Decoding allocates and drops millions of small dicts and lists (message bodies);
    reference counting frees them at once, yet every 700 allocations the collector
    would walk the young ones, a tenth of the decode's time. What exists already
    (modules, the protocol schema) is frozen out of its walks meanwhile.
    """
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
