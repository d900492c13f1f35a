#!/usr/bin/env bash
# On the lent H200: does `sweep ladder --launcher attach` agree with an independent client? (issue 10 §1)
#   usage: tools/sglang-h200/attach-proof.sh OUTDIR        (about 5-7 minutes wall)
# Starts ONE SGLang 0.5.17 server (llama3-8b-shape, dummy weights, triton attention, CUDA graphs on,
# --max-running-requests 256 --mem-fraction-static 0.14 --chunked-prefill-size 4096 --schedule-policy lpm),
# warms it, then for each concurrency in $LEVELS (default "16 32"), one after the other on that server:
#   (a) tools/sglang-h200/independent_client.py (no sweep code; aiohttp where installed, else raw asyncio
#       streams), (b) python3 -m sweep.cli ladder --launcher attach --set server.url=... at that concurrency.
# Same workload both: closed loop, prompts U(1000,1100) tokens (80% start with one of 16 shared 512-token
# prefixes), outputs U(64,256) with ignore_eos, $WARMUP_S s warm-up (5) + $MEASURE_S s windows (20); the
# prefix cache is flushed before each window. OUTDIR gets attach-proof.md (the comparison table; exit 1 if a
# figure differs by more than 10% / 20 ms), the clients' JSON, runs.csv, results.db and the server log tail.
# SESSIONS=1 (issue 31 §4): both clients run multi-turn conversations instead (U(2,4) turns, later messages of
# U(16,32) tokens, 0.2 s think time, every turn sending the conversation so far with the server's own reply), and
# the session figures (sessions completed, session time P50/P90, cache hit of turn 1 and later turns, later-turn
# prompt tokens) are compared too: the same distributions, not the same draws.
# Needs, carried: .sglang-bundle/ and .whl/ (as proof.sh). SERVER_URL=http://... measures a server that is
# already running instead of starting one (e.g. the simulator on a CPU machine, to try the script).
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd); work=${WORK:-/tmp/attach-proof}; mkdir -p "$work"
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); cd "$root"
port=${PORT:-30000}; url="http://127.0.0.1:$port"
levels=${LEVELS:-16 32}; warmup_s=${WARMUP_S:-5}; measure_s=${MEASURE_S:-20}; py=${PYTHON:-python3}
if [ -d .whl ] && [ ! -f /tmp/site/.ok ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*/*.whl
  touch /tmp/site/.ok
fi
export PYTHONPATH=/tmp/site:$root PYTHONUNBUFFERED=1
bundle="$root/.sglang-bundle/sglang-0.5.17-site.tar.xz"

server=""
stop_server() {
  [ -n "$server" ] || return 0
  kill -TERM "$server" 2>/dev/null || true  # the launcher only: SGLang drains and stops its own children
  for _ in $(seq 1 60); do kill -0 "$server" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$server" 2>/dev/null || true  # then whatever is left of its process group
  tail -c 20000 "$work/server.log" > "$out/server-log-tail.txt" 2>/dev/null || true
}
trap stop_server EXIT
if [ -n "${SERVER_URL:-}" ]; then  # an already running server (e.g. the simulator, to try this script on a CPU)
  url=${SERVER_URL%/}
else
  setsid bash "$here/start-server.sh" "$bundle" -- --model-path models/llama3-8b-shape --load-format dummy \
    --attention-backend triton --sampling-backend pytorch --enable-metrics --host 127.0.0.1 --port "$port" \
    --max-running-requests 256 --mem-fraction-static 0.14 --chunked-prefill-size 4096 --schedule-policy lpm \
    > "$work/server.log" 2>&1 &
  server=$!
fi

py_get() {  # py_get PATH [POST]: HTTP status of one call (000 when nothing answers)
  "$py" - "$url$1" "${2:-GET}" <<'EOF'
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(urllib.request.Request(sys.argv[1], method=sys.argv[2]), timeout=30).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
EOF
}
deadline=$((SECONDS + ${STARTUP_S:-420}))
until [ "$(py_get /health)" = 200 ]; do
  [ -z "$server" ] || kill -0 "$server" 2>/dev/null || { echo "server exited during start-up" >&2; exit 2; }
  [ $SECONDS -lt $deadline ] || { echo "server not healthy in time" >&2; exit 2; }
  sleep 2
done
echo "server up after ${SECONDS}s"
client=("$py" "$here/independent_client.py" --url "$url" --warmup-s "$warmup_s" --measure-s "$measure_s")
[ -n "${SESSIONS:-}" ] && client+=(--sessions --think-s 0.2)
# Warm-up, not reported: the first batches of each shape JIT-compile Triton kernels.
"${client[@]}" --concurrency 32 --measure-s 10 --seed 99 > "$work/warm.json"

workload=(--set "workload.prompt_len={\"kind\":\"uniform\",\"low\":1000,\"high\":1100}"
          --set "workload.output_len={\"kind\":\"uniform\",\"low\":64,\"high\":256}"
          --set "workload.shared_prefix={\"groups\":16,\"length\":512,\"share\":0.8}"
          --set workload.num_requests=8000 --set window.warmup_requests=0 --set "window.warmup_seconds=$warmup_s"
          --set "window.measure_seconds=$measure_s" --set window.drain_seconds=30)
[ -n "${SESSIONS:-}" ] && workload+=(--set 'workload.sessions={"turns":{"kind":"uniform","low":2,"high":4},"followup_len":{"kind":"uniform","low":16,"high":32},"think_time":{"kind":"fixed","value":0.2}}')
set +e
ind=()
for c in $levels; do
  py_get /flush_cache POST >/dev/null
  "${client[@]}" --concurrency "$c" --seed "$c" --out "$out/independent-$c.json"
  ind+=("$out/independent-$c.json")
  py_get /flush_cache POST >/dev/null
  "$py" -m sweep.cli ladder --profile interactive --launcher attach --set "server.url=$url" \
    --set "ladder=[$c]" "${workload[@]}" --db "$work/results.db" --out "$work/reports" 2>&1 | tail -n 5
done
"$py" "$here/attach_compare.py" --db "$work/results.db" --independent "${ind[@]}" --out "$out/attach-proof.md"
rc=$?
"$py" -m sweep.cli runs --db "$work/results.db" --format csv > "$out/runs.csv" || true
cp "$work/results.db" "$out/results.db"
exit $rc
