#!/usr/bin/env bash
# On the lent H200: issue 11's signal and kill -9 faults against real SGLang 0.5.17 (minutes-long start-up).
#   usage: tools/sglang-h200/faults-proof.sh STAGE OUTDIR    STAGE: kill9-starting | sigterm-measuring
# kill9-starting: kill -9 sweep while SGLang loads; the resume must kill that server's whole session, scrub the
#   API key from its log (SGLang prints server_args, api_key included) and measure the configuration once.
# sigterm-measuring: SIGTERM to sweep mid-window; it must exit 143 with no SGLang process left, the attempt
#   aborted, and the resume must measure it once. SIM=1 runs the same stages on the simulator (no GPU).
# Same carried files as proof.sh. Everything lands under $WORK (default /tmp/faults-proof); OUTDIR gets copies.
set -euo pipefail
stage=$1; out=$2; mkdir -p "$out"; work=${WORK:-/tmp/faults-proof}; rm -rf "$work"; mkdir -p "$work"
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); cd "$root"
py=${PYTHON:-python3}
if [ -z "${SIM:-}" ]; then
  if [ ! -f /tmp/site/.ok ]; then
    $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*/*.whl
    touch /tmp/site/.ok
  fi
  export PYTHONPATH=/tmp/site:$root
  bundle="$root/.sglang-bundle/sglang-0.5.17-site.tar.xz"
  bash "$here/start-server.sh" "$bundle" -- --help >/dev/null 2>&1 || true
  server=(--launcher sglang --set "server.command=[\"bash\",\"$here/start-server.sh\",\"$bundle\",\"--\"]"
          --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]')
else
  export PYTHONPATH=$root
  server=(--launcher sim --set 'server.extra_args=["--load-format","dummy","--sim-slow-start-s","20"]')
fi
export PYTHONUNBUFFERED=1
db="$work/results.db"
cmd=($py -m sweep.cli sweep --profile interactive --db "$db" --out "$work/reports" --study faults --resume
     --no-progress --driver http "${server[@]}" --set window.warmup_requests=8 --set window.measure_seconds=15
     --set window.drain_seconds=10 --set server.startup_timeout_s=400 --set 'ladder=[8,16]' --set soak.enabled=false
     --set search.screening.enabled=false
     --set 'search.space={"max_running_requests":[32,64],"mem_fraction_static":[0.85],"chunked_prefill_size":[8192]}')
q() { $py - "$db" "$1" <<'EOF'
import sqlite3, sys
try:
    print("\n".join("|".join(map(str, r)) for r in sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute(sys.argv[2])))
except sqlite3.Error:
    pass
EOF
}
wait_for() { for _ in $(seq 1 1200); do [ -n "$(eval "$1")" ] && return 0; sleep 0.5; done; echo "timed out: $1"; exit 1; }
launch_sid() { q "SELECT json_extract(server_info_json, '$.sweep_launch.sid') FROM server_configs WHERE status = 'running'
                   AND json_extract(server_info_json, '$.sweep_launch.sid') IS NOT NULL"; }
left() { ps -o pid=,cmd= -s "$1" 2>/dev/null || true; }

"${cmd[@]}" >"$work/first.log" 2>&1 &
first=$!
case "$stage" in
  kill9-starting)
    wait_for 'launch_sid'
    sid=$(launch_sid); log=$(q "SELECT log_path FROM server_configs WHERE status = 'running'")
    wait_for "grep -l 'api_key' '$log' 2>/dev/null"
    kill -9 "$first"; wait "$first" || true
    echo "after kill -9: session $sid has"; left "$sid"
    "${cmd[@]}" >"$work/resume.log" 2>&1; rc=$?
    echo "resume exit $rc"; echo "session $sid after the resume:"; left "$sid"
    grep -Eo "api_key='[^']*'" "$log" | head -1 ;;
  sigterm-measuring)
    wait_for "q \"SELECT id FROM runs WHERE status = 'running'\""
    sid=$(launch_sid)
    kill -TERM "$first"; set +e; wait "$first"; echo "sweep exit $? (143 expected)"; set -e
    echo "session $sid after SIGTERM:"; left "$sid"
    nvidia-smi --query-gpu=memory.used --format=csv 2>/dev/null || true
    "${cmd[@]}" >"$work/resume.log" 2>&1; echo "resume exit $?" ;;
esac
q "SELECT id, max_running_requests, status, failure_reason FROM server_configs" | tee "$out/configs.txt"
q "SELECT server_config_id, concurrency, status FROM runs" | tee "$out/runs.txt"
cp "$work"/*.log "$out/" 2>/dev/null || true
