"""`make bench ARGS=read-paths`: the read paths people wait on (issue 33), the tree before a change against this one
in one run: `sweep compare` refusing two workloads, `sweep explain` of a big study, and `sweep export --what
requests --format parquet` at two sizes (its memory should not grow with the requests). Each command is a child
process run from a scratch folder with one tree on PYTHONPATH; its wall time, CPU time and peak RSS come from
os.wait4 (the child's own rusage). The databases are bench/read_paths_db.py's, one built by each tree.

BENCH_BEFORE (a git revision, default 435a382: main before issue 33's read paths) names the tree before,
BENCH_AFTER the tree after (default: this working tree as it is);
READ_PATHS_REQUESTS (default 200,000) the big study's requests; READ_PATHS_REPEAT (default 3) the runs per
command (medians; before and after run in turn). Results: stdout and reports/bench/bench-read-paths.md; docs/bench-read-paths.md keeps the
reading."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import write_result

ROOT = Path(__file__).resolve().parent.parent
BEFORE = os.environ.get("BENCH_BEFORE", "435a382")
AFTER = os.environ.get("BENCH_AFTER", "")  # a revision; empty: this working tree as it is
REQUESTS = int(os.environ.get("READ_PATHS_REQUESTS", "200000"))
REPEAT = int(os.environ.get("READ_PATHS_REPEAT", "3"))


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    peak_mib: float
    rc: int


def child(argv: list[str], tree: Path, cwd: Path) -> Run:
    """Run argv with `tree` first on PYTHONPATH (then this process's path, for pyarrow where it was installed apart);
    the child's own wall time, CPU time and peak RSS."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *sys.path[1:]])}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, proc.returncode)


def _tree(rev: str, into: Path) -> Path:
    """The files of git revision `rev`, unpacked into `into`."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def median(runs: list[Run]) -> Run:
    return Run(statistics.median(r.wall_s for r in runs), statistics.median(r.cpu_s for r in runs),
               statistics.median(r.peak_mib for r in runs), runs[0].rc)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="sweep-read-paths-") as tmp:
        scratch = Path(tmp)
        trees = {"before": _tree(BEFORE, scratch / "before"), "after": _tree(AFTER, scratch / "after") if AFTER else ROOT}
        sizes = {"big": REQUESTS, "small": max(1, REQUESTS // 4)}
        dbs: dict[tuple[str, str], Path] = {}
        for side, tree in trees.items():  # each tree writes its own database (the schema differs by a migration)
            for size, n in sizes.items():
                db = scratch / f"{side}-{size}.db"
                r = child([sys.executable, str(ROOT / "bench" / "read_paths_db.py"), str(db), "--requests", str(n)],
                          tree, scratch)
                if r.rc != 0:
                    print(f"building {db} with the {side} tree failed (exit {r.rc})", file=sys.stderr)
                    return 1
                dbs[side, size] = db
        cases = [("compare big other (refused: two workloads)", "big", ["compare", "big", "other"]),
                 ("explain big", "big", ["explain", "big"]),
                 (f"export parquet, {sizes['small']:,} requests", "small",
                  ["export", "big", "--what", "requests", "--format", "parquet"]),
                 (f"export parquet, {sizes['big']:,} requests", "big",
                  ["export", "big", "--what", "requests", "--format", "parquet"])]
        lines = [f"# read paths: {BEFORE} (before) against {AFTER or 'this tree'} (after), {REPEAT} runs each, "
                 "medians", "",
                 "| command | exit before/after | wall s before | wall s after | after/before | peak MiB before | "
                 "peak MiB after | after/before |", "|---|---|---|---|---|---|---|---|"]
        for label, size, args in cases:
            runs: dict[str, list[Run]] = {side: [] for side in trees}
            for i in range(REPEAT):  # before and after in turn, so a busy moment weighs on both alike
                for side, tree in trees.items():
                    extra = ["--out", str(scratch / f"{side}-{size}-{i}.parquet")] if "export" in args else []
                    runs[side].append(child([sys.executable, "-m", "sweep.cli", *args, "--db", str(dbs[side, size]),
                                             *extra], tree, scratch))
            got = {side: median(r) for side, r in runs.items()}
            b, a = got["before"], got["after"]
            lines.append(f"| `{label}` | {b.rc}/{a.rc} | {b.wall_s:.2f} | {a.wall_s:.2f} | {a.wall_s / b.wall_s:.2f} | "
                         f"{b.peak_mib:,.0f} | {a.peak_mib:,.0f} | {a.peak_mib / b.peak_mib:.2f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    write_result("read-paths", text, "docs/bench-read-paths.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
