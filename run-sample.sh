#!/usr/bin/env bash
# Set up and run kdissect on a bundled sample: .venv, editable install, decode, then the analysis (on
# the embedded engine: no Java) with its HTML report. A first setup installs pure Python, so the report
# comes first, and compiles the hot path afterwards.
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

# pip install -e . into .venv, its progress followed; KDISSECT_PURE=1 in the environment skips compiling.
install() {
    local log=.venv/pip.log pip_pid
    : >"$log"
    ( .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -v -e . ) >>"$log" 2>&1 &
    pip_pid=$!
    follow_install "$pip_pid" "$log"
    if ! wait "$pip_pid"; then
        tail -n 30 "$log" >&2
        echo "pip install failed (the whole log: .venv/pip.log)" >&2
        exit 1
    fi
}

compile_later=0
if [ ! -x .venv/bin/kdissect ] || ! .venv/bin/python -c "import pysail.spark, pyspark.sql.connect.session" 2>/dev/null; then
    echo "setting up .venv: pip install -e . (pure Python first, so the report comes first; log: .venv/pip.log)"
    started=$SECONDS
    python3 -m venv .venv
    KDISSECT_PURE=1 install
    echo "set up in $((SECONDS - started)) s"
    compile_later=1
fi

.venv/bin/kdissect decode "$sample" -o out/
echo
echo "analyzing out/ (the embedded engine: no JVM) ..."
.venv/bin/kdissect analyze out/ --report report.html --json results.json
echo
echo "The report: $PWD/report.html (open it in a browser; it needs no network)"
echo "Next: .venv/bin/kdissect show $sample --api Produce"
echo "      .venv/bin/python -m analysis groups out/      # one job's tables"
echo "      .venv/bin/kdissect analyze out/ --engine spark   # the same tables on JVM Spark (Java 17)"

if [ "$compile_later" = 1 ]; then
    echo
    echo "compiling the hot path on every core for full decoding speed (a few minutes; kdissect works meanwhile) ..."
    started=$SECONDS
    install
    echo "compiled in $((SECONDS - started)) s: $(.venv/bin/kdissect --version)"
    case "$(.venv/bin/kdissect --version)" in
        *pure\ Python*) echo "note: the hot path did not compile (see .venv/pip.log): kdissect runs as pure Python," \
                             "slower, same output" ;;
    esac
fi
