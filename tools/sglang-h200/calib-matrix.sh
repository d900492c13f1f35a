#!/usr/bin/env bash
# On the lent H200: the calibration matrix of workload shapes (issue 21 §2) on ONE real SGLang 0.5.17 server.
#   usage: tools/sglang-h200/calib-matrix.sh TAG KNOBS OUT SHAPE...
#     TAG   names the configuration (studies are matrix-TAG-SHAPE)
#     KNOBS max_running_requests=M,mem_fraction_static=F,chunked_prefill_size=C (schedule policy lpm)
#     SHAPE tools/calibration_matrix.py names, in priority order (a shape that no longer fits is skipped)
# Starts the server (llama3-8b-shape, dummy weights, triton attention, CUDA graphs on), warms its kernels with one
# burst of every prompt length, then tools/calibration_matrix.py climbs 16/32/64/128 per shape through
# `sweep ladder --launcher attach` until DEADLINE_S (default 560, from this script's start). OUT gets results.db,
# the server log (xz) and this script's log: tools/calibrate.py --export-matrix reads them.
# Needs, carried: .sglang-bundle/ and .whl/site (as proof.sh). LAUNCHER=sim runs the simulated server instead (a CPU
# dry run of the same path).
set -uo pipefail
tag=$1; knobs=$2; out=$(mkdir -p "$3" && cd "$3" && pwd); shift 3
t_start=$SECONDS; budget=${DEADLINE_S:-560}
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); cd "$root"
work=${WORK:-/tmp/calib-matrix}; mkdir -p "$work"; port=${PORT:-30000}; url="http://127.0.0.1:$port"
if [ -f .whl/site/core-site.tar.xz ] && [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site && tar -xJf .whl/site/core-site.tar.xz -C /tmp/site && touch /tmp/site/.ok
fi
export PYTHONPATH=/tmp/site:$root PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
IFS=, read -r -a kv <<< "$knobs"; args=()
for pair in "${kv[@]}"; do args+=("--${pair%%=*}" "${pair#*=}"); done
args=("${args[@]//_/-}")  # max_running_requests -> --max-running-requests (values have no underscores)
common=(--model-path models/llama3-8b-shape --load-format dummy --enable-metrics --host 127.0.0.1 --port "$port"
        --schedule-policy lpm "${args[@]}")
if [ "${LAUNCHER:-sglang}" = sim ]; then
  setsid "$py" -m sglang_sim "${common[@]}" > "$work/server.log" 2>&1 &
else
  setsid bash "$here/start-server.sh" "$root/.sglang-bundle/sglang-0.5.17-site.tar.xz" -- "${common[@]}" \
    --attention-backend triton --sampling-backend pytorch > "$work/server.log" 2>&1 &
fi
server=$!
finish() {
  kill -TERM "$server" 2>/dev/null
  for _ in $(seq 1 40); do kill -0 "$server" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$server" 2>/dev/null
  cp "$work/results.db" "$out/results.db" 2>/dev/null
  xz -c "$work/server.log" > "$out/server-$tag.log.xz" 2>/dev/null
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$out/matrix-$tag.log" 2>/dev/null
}
trap finish EXIT
exec > >(tee -a "$out/matrix-$tag.log") 2>&1
echo "[matrix] $tag: $knobs; shapes $*"
"$py" - "$url" "$server" <<'EOF' || exit 2
import sys, time, httpx, os
url, pid = sys.argv[1], int(sys.argv[2])
end = time.monotonic() + 420
while time.monotonic() < end:
    try:
        if httpx.get(url + "/health", timeout=2).status_code == 200:
            break
    except httpx.HTTPError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("[matrix] server exited during start-up")
    time.sleep(1)
else:
    sys.exit("[matrix] server not healthy in time")
print(f"[matrix] server up", flush=True)
# Triton JIT-compiles the extend kernels on first use: one burst of each prompt length before any window.
import concurrent.futures as cf
def one(n):
    body = {"input_ids": [100 + (i * 7 + n) % 900 for i in range(n)],
            "sampling_params": {"max_new_tokens": 32, "ignore_eos": True, "temperature": 0}}
    return httpx.post(url + "/generate", json=body, timeout=120).status_code
t = time.monotonic()
with cf.ThreadPoolExecutor(48) as ex:
    codes = list(ex.map(one, [200, 1000, 4000, 700, 2500, 5000] * 8))
httpx.post(url + "/flush_cache", timeout=30)
print(f"[matrix] kernels warm in {time.monotonic() - t:.1f} s: {sorted(set(codes))}", flush=True)
EOF
grep -o "max_total_num_tokens=[0-9]*" "$work/server.log" | head -1
left=$(( budget - (SECONDS - t_start) - 15 ))
"$py" tools/calibration_matrix.py run --url "$url" --db "$work/results.db" --out "$work/reports" \
  --config "$knobs,schedule_policy=lpm" --tag "$tag" --deadline-s "$left" "$@"
echo "[matrix] $tag done after $(( SECONDS - t_start )) s"
