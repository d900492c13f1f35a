"""`--format json` of the read verbs against docs/json-schema/ (schema_version 1), `sweep knee --json`, and
`sweep export` (csv, jsonl; parquet where pyarrow imports, else its one-line refusal), over a real screened smoke
study on the virtual driver."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration  # every test here runs a whole study

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "json-schema"
SCREENED = ["--set", "search.screening.enabled=true", "--set", "search.screening.fraction=0.5",
            "--set", "search.screening.keep=0.5"]
_TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
                          "integer": int, "number": (int, float)}


def sweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def _is(value: object, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[kind])


def check(value: object, schema: dict[str, Any], where: str = "$") -> None:
    """The subset of JSON Schema docs/json-schema uses (type, const, enum, pattern, required, properties, items,
    oneOf and a $ref to a sibling file), checked by hand: jsonschema is not a dependency."""
    if "$ref" in schema:
        schema = json.loads((SCHEMAS / schema["$ref"]).read_text())
    if "type" in schema:
        kinds = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        assert any(_is(value, k) for k in kinds), f"{where}: {value!r} is not {kinds}"
    if "const" in schema:
        assert value == schema["const"], f"{where}: {value!r} != {schema['const']!r}"
    if "pattern" in schema and isinstance(value, str):
        assert re.search(schema["pattern"], value), f"{where}: {value!r} does not match {schema['pattern']!r}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if isinstance(value, dict):
        missing = [k for k in schema.get("required", []) if k not in value]
        assert not missing, f"{where}: missing {missing}"
        for k, sub in schema.get("properties", {}).items():
            if k in value:
                check(value[k], sub, f"{where}.{k}")
        if "oneOf" in schema:
            assert sum(all(k in value for k in alt.get("required", [])) for alt in schema["oneOf"]) == 1, where
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(item, schema["items"], f"{where}[{i}]")


def validated(proc: subprocess.CompletedProcess[str], schema: str) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    check(doc, json.loads((SCHEMAS / f"{schema}.json").read_text()))
    assert doc["schema_version"] == 1
    return dict(doc)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("json")
    proc = sweep("knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"), "--db", str(tmp / "r.db"), "--out",
                 str(tmp / "rep"), "--driver", "virtual", "--study", "js", "--no-progress", "--json", *SCREENED,
                 cwd=tmp)
    return tmp / "r.db", validated(proc, "answer")


def test_knee_json_is_the_answer_json_beside_the_report(study: tuple[Path, dict[str, Any]]) -> None:
    db, answer = study
    assert answer == json.loads((db.parent / "rep" / "js" / "answer.json").read_text())
    assert answer["tiers"][0]["winner_id"] is not None and answer["tiers"][0]["sla"]["ttft_ms"] == 1000


def test_every_read_verb_writes_its_schema(study: tuple[Path, dict[str, Any]]) -> None:
    db, answer = study
    cwd, d = db.parent, ("--db", str(db), "--format", "json")
    runs = validated(sweep("runs", *d, cwd=cwd), "runs")["runs"]
    assert {r["phase"] for r in runs} == {"screen", "final"}
    run = validated(sweep("show", str(runs[0]["run_id"]), *d, cwd=cwd), "show")
    assert run["run"]["run_id"] == runs[0]["run_id"]
    shown = validated(sweep("show", "js", *d, cwd=cwd), "show")
    assert shown["winners"][0]["server_config_id"] == answer["tiers"][0]["winner_id"]
    explained = validated(sweep("explain", "js", *d, cwd=cwd), "explain")
    assert explained["answer"]["tiers"][0]["winner_id"] == answer["tiers"][0]["winner_id"]
    compared = validated(sweep("compare", "js", str(runs[0]["run_id"]), *d, cwd=cwd), "compare")
    assert [s["kind"] for s in compared["sides"]] == ["study", "run"]
    workers = validated(sweep("study", "workers", "--study", "js", *d, cwd=cwd), "study-workers")
    assert len(workers["workers"]) == 1


def test_report_json_names_its_files_and_the_answer_carries_the_launch_command(
        study: tuple[Path, dict[str, Any]]) -> None:
    """issue 33: `sweep report` had no --format json; answer.json had no launch command; times had no offset."""
    db, answer = study
    cwd = db.parent
    rep = validated(sweep("report", "js", "--db", str(db), "--out", str(cwd / "again"), "--format", "json", cwd=cwd),
                    "report")
    assert Path(rep["markdown"]).is_file() and Path(rep["answer_json"]).is_file() and rep["missing"] == []
    assert rep["answer"]["tiers"][0]["winner_id"] == answer["tiers"][0]["winner_id"]
    tier = answer["tiers"][0]
    assert tier["command"].startswith("python -m sglang.launch_server --model-path ")
    assert tier["argv"][:3] == ["python", "-m", "sglang.launch_server"] and answer["engine"] == "sglang"
    runs = json.loads(sweep("runs", "--db", str(db), "--format", "json", cwd=cwd).stdout)["runs"]
    assert all(r["started_at"].endswith("+00:00") for r in runs)


def test_export_csv_and_jsonl_agree_with_the_store(study: tuple[Path, dict[str, Any]]) -> None:
    db, _ = study
    cwd = db.parent
    runs = json.loads(sweep("runs", "--db", str(db), "--format", "json", cwd=cwd).stdout)["runs"]
    windows = sweep("export", "js", "--db", str(db), "--what", "windows", cwd=cwd)
    assert windows.returncode == 0, windows.stderr
    rows = list(csv.DictReader(io.StringIO(windows.stdout)))
    assert sorted(int(r["run_id"]) for r in rows) == sorted(r["run_id"] for r in runs)
    out = cwd / "requests.jsonl"
    req = sweep("export", "js", "--db", str(db), "--what", "requests", "--format", "jsonl", "--out", str(out), cwd=cwd)
    assert req.returncode == 0, req.stderr
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    counts = {r["run_id"]: r["n_started"] + r["n_warmup"] for r in runs}
    assert len(lines) == sum(counts.values()) and f"{len(lines)} requests rows" in req.stderr
    assert {ln["run_id"] for ln in lines} == set(counts) and {"ttft_ms", "phase", "concurrency"} <= set(lines[0])
    samples = sweep("export", "js", "--db", str(db), "--what", "samples", "--format", "jsonl", cwd=cwd)
    assert samples.returncode == 0 and {"name", "value", "t"} <= set(json.loads(samples.stdout.splitlines()[0]))
    bad = sweep("export", "js", "--db", str(db), "--what", "everything", cwd=cwd)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --what 'everything': expected one of requests, windows, samples"]


def test_export_parquet_or_its_one_line_refusal(study: tuple[Path, dict[str, Any]]) -> None:
    db, _ = study
    out = db.parent / "w.parquet"
    proc = sweep("export", "js", "--db", str(db), "--format", "parquet", "--out", str(out), cwd=db.parent)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "pyarrow" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    assert pq.read_table(out).num_rows == len(json.loads(sweep("runs", "--db", str(db), "--format", "json",
                                                               cwd=db.parent).stdout)["runs"])
