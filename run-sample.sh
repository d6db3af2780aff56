#!/usr/bin/env bash
# Set up and run kdissect on a bundled sample: .venv, editable install, decode, then the Spark
# analysis with its HTML report.
set -euo pipefail
cd "$(dirname "$0")"

sample=samples/mixed.pcap
[ -f "$sample" ] || sample=samples/tansu-produce-codecs.pcap

# pip's progress, filtered from its verbose log as it grows: the packages it fetches and installs and
# the build's own lines (setup.py: a line per compiled module); a heartbeat when nothing new came for 10 s.
follow_install() {
    local pid=$1 log=$2 started=$SECONDS quiet_since=$SECONDS line status
    while :; do
        if IFS= read -r -t 5 line; then
            line="${line#"${line%%[![:space:]]*}"}"   # pip -v indents the build's own lines
            case "$line" in
                kafka-dissect:*)                          echo "  ${line#kafka-dissect: }"; quiet_since=$SECONDS ;;
                Collecting\ *|Downloading\ *)             echo "  ${line%% (*}"; quiet_since=$SECONDS ;;
                Installing\ collected\ packages:*)        echo "  installing the packages (pyspark is ~400 MB) ..."
                                                          quiet_since=$SECONDS ;;
                Successfully\ installed*)                 echo "  installed"; quiet_since=$SECONDS ;;
            esac
        else
            status=$?
            [ "$status" -gt 128 ] || break   # end of the log: pip is done
        fi
        # Lines filtered out do not count: the heartbeat is for the user, who saw nothing.
        if [ $((SECONDS - quiet_since)) -ge 10 ]; then
            echo "  ... $((SECONDS - started)) s"
            quiet_since=$SECONDS
        fi
    done < <(tail -n +1 -F --pid="$pid" "$log" 2>/dev/null)
}

if [ ! -x .venv/bin/kdissect ] || ! .venv/bin/python -c "import pyspark.sql.connect.session" 2>/dev/null; then
    echo "setting up .venv: pip install -e . (Spark is part of it; the hot path compiles on every core; log: .venv/pip.log)"
    started=$SECONDS
    python3 -m venv .venv
    log=.venv/pip.log
    : >"$log"
    ( .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -v -e . ) >>"$log" 2>&1 &
    pip_pid=$!
    follow_install "$pip_pid" "$log"
    if ! wait "$pip_pid"; then
        tail -n 30 "$log" >&2
        echo "pip install failed (the whole log: .venv/pip.log)" >&2
        exit 1
    fi
    echo "set up in $((SECONDS - started)) s: $(.venv/bin/kdissect --version)"
    case "$(.venv/bin/kdissect --version)" in
        *pure\ Python*) echo "note: the hot path did not compile (see .venv/pip.log): kdissect runs as pure Python," \
                             "slower, same output" ;;
    esac
fi

.venv/bin/kdissect decode "$sample" -o out/
echo
echo "analyzing out/ with Spark (local[*]) ..."
.venv/bin/kdissect analyze out/ --master 'local[*]' --report report.html --json results.json
echo
echo "The report: $PWD/report.html (open it in a browser; it needs no network)"
echo "Next: .venv/bin/kdissect show $sample --api Produce"
echo "      .venv/bin/python -m analysis groups out/      # one job's tables"
echo "      .venv/bin/kdissect spark-server start          # keep Spark warm: analyses then answer in seconds"
