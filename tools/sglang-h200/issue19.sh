#!/usr/bin/env bash
# Issues 19 and 20 on the lent H200: one proof.sh STAGE (refine | answer | sessions) inside DEADLINE_S seconds (a device call's limit is
# 600 s), then the few files a device call brings back (at most 8) copied to OUT whatever happened: results.db (every
# report can be written again from it here: `sweep report STUDY --db results.db`), the log, the reports, the answer.
#   usage: tools/sglang-h200/issue19.sh STAGE OUT        (carry .sglang-bundle and .whl/core)
set -uo pipefail
stage=$1; out=$2; mkdir -p "$out"; work=${WORK:-/tmp/proof}; tmp=$(mktemp -d)
start=$(date +%s)
timeout -s INT "${DEADLINE_S:-560}" bash "$(dirname "$0")/proof.sh" "$stage" "$tmp" > "$out/$stage.log" 2>&1
rc=$?
echo "stage $stage: exit $rc after $(( $(date +%s) - start )) s" >> "$out/$stage.log"
cp "$work/results.db" "$out/results.db" 2>/dev/null
for d in "$work"/reports/*/; do
  n=$(basename "$d"); cp "$d/report.md" "$out/$n-report.md" 2>/dev/null; cp "$d/answer.json" "$out/$n-answer.json" 2>/dev/null
done
cp "$tmp/answer-explain.txt" "$out/" 2>/dev/null
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$out/$stage.log" 2>/dev/null
exit $rc
