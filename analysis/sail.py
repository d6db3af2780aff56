"""The embedded engine: Sail, a Spark Connect server written in Rust on Apache DataFusion, run inside this
process on a private loopback port for the length of one command.

The analysis is PySpark code sent over Spark Connect, so it runs unchanged on Sail or on JVM Spark. On one
machine Sail answers a small analysis in well under a second, where JVM Spark spends seconds starting a
JVM and planning each query, and it needs no Java at all. JVM Spark (``--engine spark``, a ``--master``,
spark-submit) takes over for clusters.

Sail's server imports pyspark in its own process to learn which Spark it serves, and knows the releases up
to :data:`NEWEST_PYSPARK`: a newer pyspark is one line naming the version to install. Its log goes to
stderr through Rust's ``RUST_LOG``, which is set to errors only unless the user set it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from analysis.exceptions import SparkUnavailable

# pyspark releases a pysail 0.7 server serves (it refuses to start a session for any other).
OLDEST_PYSPARK = (3, 5)
NEWEST_PYSPARK = (4, 2)
INSTALL = "pip install 'pysail>=0.7.2,<0.8' 'pyspark[connect]>=4.0,<4.3'"
LOG_ENV = "RUST_LOG"
# Sail's allocator (mimalloc 3) returns freed memory to the OS only a second after it is freed (4 s for
# whole arena ranges): the analysis's many short queries then each leave their peak resident. Read once,
# when the engine's library loads; a user's own setting wins.
ALLOCATOR_ENV = {"MIMALLOC_PURGE_DELAY": "0"}


def _version(text: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def check() -> None:
    """SparkUnavailable (one line) unless the embedded engine can start here: pysail installed, and a
    pyspark it serves."""
    for key, value in ALLOCATOR_ENV.items():
        os.environ.setdefault(key, value)     # before the engine's library loads, which reads them once
    try:
        import pysail.spark  # noqa: F401
    except ImportError:
        raise SparkUnavailable(f"the embedded engine (Sail) is not installed: {INSTALL}, or run JVM Spark with "
                               "--engine spark") from None
    import pyspark
    found = _version(pyspark.__version__)
    if not OLDEST_PYSPARK <= found <= NEWEST_PYSPARK:
        newest = ".".join(map(str, NEWEST_PYSPARK))
        raise SparkUnavailable(f"the embedded engine (Sail) serves pyspark up to {newest}, this is pyspark "
                               f"{pyspark.__version__}: {INSTALL}, or run JVM Spark with --engine spark")


@dataclass
class Embedded:
    """A running Sail server of this process: ``url`` for Spark Connect clients, :meth:`stop` to end it."""

    server: Any
    url: str

    def stop(self) -> None:
        try:
            self.server.stop()
        except Exception:  # noqa: BLE001 - already stopped, or stopping while the process ends
            pass

    @property
    def running(self) -> bool:
        try:
            return bool(self.server.running)
        except Exception:  # noqa: BLE001
            return False


def start(host: str = "127.0.0.1", port: int = 0) -> Embedded:
    """A Sail server on ``host:port`` (port 0: one the kernel picks), answering once this returns."""
    check()
    os.environ.setdefault(LOG_ENV, "error")    # read by the server as it starts: its INFO lines are noise here
    from pysail.spark import SparkConnectServer
    try:
        server = SparkConnectServer(host, port)
        server.start(background=True)
        bound_host, bound_port = server.listening_address
    except Exception as exc:  # noqa: BLE001 - Sail raises its own types (an address in use among them)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "in use" in text.lower():
            raise SparkUnavailable(f"the embedded engine could not listen on {host}:{port}: the port is in use "
                                   "(give another with --port)") from None
        raise SparkUnavailable(f"the embedded engine (Sail) did not start: {text}") from None
    return Embedded(server, f"sc://{bound_host}:{bound_port}")
