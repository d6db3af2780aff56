"""``kdissect spark-decode`` as a script for spark-submit, which runs a Python file rather than a command.

On a cluster (the inputs and OUTDIR on a shared filesystem)::

    spark-submit --master spark://HOST:7077 \\
        "$(python -c 'import kdissect.spark.decode as m; print(m.__file__)')" \\
        /shared/captures/ -o /shared/dataset/ --shards 8

The command itself is :mod:`kdissect.spark.driver`'s; this file is apart from it because it goes through
the command line (:mod:`kdissect.commands.cli`), which runs the driver.
"""

from __future__ import annotations

import sys

from kdissect.commands.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    """``spark-submit .../decode.py INPUT... -o OUTDIR [options]``: as ``kdissect spark-decode``."""
    return cli_main(["spark-decode", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
