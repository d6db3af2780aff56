#!/usr/bin/env bash
# Set up and run kdissect on a bundled sample: .venv, editable install, decode, summary.
set -euo pipefail
cd "$(dirname "$0")"

sample=samples/mixed.pcap
[ -f "$sample" ] || sample=samples/tansu-produce-codecs.pcap

if [ ! -x .venv/bin/kdissect ]; then
    echo "setting up .venv (pip install -e .) ..."
    python3 -m venv .venv
    if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e .; } \
            >.venv/pip.log 2>&1; then
        cat .venv/pip.log >&2
        exit 1
    fi
fi

.venv/bin/kdissect decode "$sample" -o out/
echo
echo "Next: .venv/bin/kdissect show $sample --api Produce"
echo "      .venv/bin/python -c \"import pandas as pd; print(pd.read_parquet('out/exchanges').head())\""
