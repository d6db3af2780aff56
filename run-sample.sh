#!/usr/bin/env bash
# Set up and run kdissect on a bundled sample: .venv, editable install, decode, then the Spark
# analysis with its HTML report.
set -euo pipefail
cd "$(dirname "$0")"

sample=samples/mixed.pcap
[ -f "$sample" ] || sample=samples/tansu-produce-codecs.pcap

if [ ! -x .venv/bin/kdissect ] || ! .venv/bin/python -c "import pyspark" 2>/dev/null; then
    echo "setting up .venv (pip install -e .: Spark is part of it, a few hundred MB, and the hot path is compiled, a few minutes) ..."
    python3 -m venv .venv
    if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e .; } \
            >.venv/pip.log 2>&1; then
        cat .venv/pip.log >&2
        exit 1
    fi
fi

.venv/bin/kdissect decode "$sample" -o out/
echo
echo "analyzing out/ with Spark (local[*]) ..."
.venv/bin/kdissect analyze out/ --master 'local[*]' --report report.html --json results.json
echo
echo "The report: $PWD/report.html (open it in a browser; it needs no network)"
echo "Next: .venv/bin/kdissect show $sample --api Produce"
echo "      .venv/bin/python -m analysis groups out/      # one job's tables"
