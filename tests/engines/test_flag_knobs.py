"""Every SGLang flag a knob (issue 30 §1): the flag table, ServerConfig.flags, the space's dimensions, the sampler,
the store and `sweep runs`, and the bundled kv-dtype profile end to end on the simulator."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import optuna
import pytest

from sweep.analysis.cost import usd_per_million_output
from sweep.cli import main
from sweep.core.types import JSON, FlagScalar, ServerConfig, fixed_flags
from sweep.engines import SGLANG
from sweep.engines.flag_table import parse_help, stored
from sweep.profile import load_profile
from sweep.profile.grid import grid
from sweep.study.sampler import suggest
from sweep.views.fixed_flags import differences, fixed_flags_of

ROOT = Path(__file__).resolve().parents[2]
HELP = """usage: sglang serve [-h] --model-path MODEL_PATH [--kv-cache-dtype {auto,fp8_e5m2}]

options:
  -h, --help            show this help message and exit
  --model-path MODEL_PATH, --model MODEL_PATH
                        The path of the model weights.
  --kv-cache-dtype {auto,fp8_e5m2}
                        Data type for kv cache storage.
  --enable-mixed-chunk  Enabling mixing prefill and decode in a batch.
  --cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE
                        Maximum batch size captured for the decode cuda graph.
  --cuda-graph-max-bs CUDA_GRAPH_MAX_BS_DECODE
                        Deprecated alias for --cuda-graph-max-bs-decode.
  --cuda-graph-bs CUDA_GRAPH_BS [CUDA_GRAPH_BS ...]
                        Batch sizes to capture.
  --speculative-algorithm SPECULATIVE_ALGORITHM
                        Speculative algorithm.
"""


def test_the_help_text_gives_each_flag_its_kind_and_choices() -> None:
    t = parse_help(HELP, "sglang", "test")
    assert t.get("kv_cache_dtype").choices == ("auto", "fp8_e5m2")
    assert t.get("enable_mixed_chunk").kind == "bool"
    assert t.get("cuda_graph_max_bs").kind == "int" and t.get("cuda_graph_max_bs").option == "--cuda-graph-max-bs"
    assert t.get("cuda_graph_bs").kind == "list"
    assert t.get("speculative_algorithm").kind == "str" and t.get("model").option == "--model"
    with pytest.raises(ValueError, match="did you mean kv_cache_dtype"):
        t.get("kv_cache_dtyp")
    # the stored tables: 0.5.17 kept --cuda-graph-max-bs as an alias, 0.5.23 dropped it
    assert stored("sglang", "0.5.17").get("cuda_graph_max_bs").kind == "int"
    assert "cuda_graph_max_bs" not in stored("sglang", "0.5.23").flags


def test_flags_are_part_of_the_configuration_and_its_launch() -> None:
    plain = ServerConfig(max_running_requests=64)
    assert plain.key() == "df3523a161b3"  # unchanged from before flags existed: stored keys stay valid
    cfg = ServerConfig.of({"max_running_requests": 64, "kv_cache_dtype": "fp8_e5m2", "enable_mixed_chunk": True,
                           "disable_radix_cache": False})
    assert cfg.key() != plain.key() and hash(cfg) == hash(ServerConfig.of(cfg.knobs()))
    assert SGLANG.knob_args(cfg) == ["--max-running-requests", "64",  # a false switch is left out
        "--enable-mixed-chunk", "--kv-cache-dtype", "fp8_e5m2"]
    other = ServerConfig.of({"max_running_requests": 64, "kv_cache_dtype": "auto", "enable_mixed_chunk": True,
                             "disable_radix_cache": False})
    hide = fixed_flags([cfg, other])
    assert cfg.label(hide=hide) == "mrr=64 kv_cache_dtype=fp8_e5m2"  # only the flag that varies
    assert cfg.label() == "mrr=64 disable_radix_cache=off enable_mixed_chunk=on kv_cache_dtype=fp8_e5m2"


def _profile(tmp_path: Path, space: str, sampler: str = "grid") -> Path:
    text = (ROOT / "profiles" / "smoke.yaml").read_text().replace("sampler: grid", f"sampler: {sampler}")
    text = text.replace("    max_running_requests: [4, 8]\n    mem_fraction_static: [0.85]\n", space)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def test_conditional_flags_follow_their_condition_in_every_sampler(tmp_path: Path) -> None:
    space = ("    speculative_algorithm: [EAGLE, NGRAM]\n"
             "    speculative_num_steps: {values: [3, 5], when: {speculative_algorithm: EAGLE}}\n"
             "    cuda_graph_max_bs: {low: 16, high: 512, log: true}\n")
    prof = load_profile(_profile(tmp_path, space, "tpe"))
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))
    seen = []
    for _ in range(12):
        trial = study.ask()
        cfg = suggest(trial, prof.search.space)
        seen.append(cfg)
        study.tell(trial, 1.0)
        assert 16 <= int(cfg.flags["cuda_graph_max_bs"]) <= 512 and isinstance(cfg.flags["cuda_graph_max_bs"], int)
        assert ("speculative_num_steps" in cfg.flags) == (cfg.flags["speculative_algorithm"] == "EAGLE")
    assert {c.flags["speculative_algorithm"] for c in seen} == {"EAGLE", "NGRAM"}
    # the grid sampler enumerates the product; where the condition fails the flag is left to the server
    grid_prof = load_profile(_profile(tmp_path, space.replace("{low: 16, high: 512, log: true}", "[64]")))
    g = grid(grid_prof.search.space)
    study = optuna.create_study(sampler=optuna.samplers.GridSampler(g, seed=0))
    configs: set[ServerConfig] = set()

    def measure(t: optuna.Trial) -> float:
        configs.add(suggest(t, grid_prof.search.space, g))
        return 1.0
    study.optimize(measure, n_trials=4)
    assert {(c.flags["speculative_algorithm"], c.flags.get("speculative_num_steps")) for c in configs} == \
        {("EAGLE", 3), ("EAGLE", 5), ("NGRAM", None)}
    assert all(c.label().count("cuda_graph_max_bs") == 0 for c in configs)  # fixed by the space: not in labels


@pytest.mark.integration
def test_the_bundled_kv_dtype_profile_runs_end_to_end_on_the_simulator(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    rc = main(["knee", "--profile", "kv-dtype", "--db", str(db), "--out", str(tmp_path / "rep"), "--launcher", "sim",
               "--driver", "virtual", "--no-progress", "--study", "kvd",
               "--set", "ladder=[32,96]", "--set", "ladder_max=0", "--set", "window.measure_seconds=4",
               "--set", "window.warmup_seconds=0", "--set", "window.warmup_requests=8",
               "--set", "window.drain_seconds=4", "--set", "workload.num_requests=600",
               "--set", "search.baseline=false", "--set", "search.space.mem_fraction_static=[0.14]"])
    assert rc == 0, capsys.readouterr().err
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT flags_json, predicted_pool_tokens, pool_tokens FROM server_configs").fetchall()
    flags = sorted((json.loads(f)["kv_cache_dtype"], json.loads(f)["cuda_graph_max_bs"], p, q) for f, p, q in rows)
    assert [f[:2] for f in flags] == [("auto", 64), ("auto", 256), ("fp8_e5m2", 64), ("fp8_e5m2", 256)]
    auto_pool, fp8_pool = flags[0][2], flags[2][2]
    assert abs(fp8_pool - 2 * auto_pool) <= 1 and all(p == q for *_, p, q in flags)  # predicted = the server's
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--columns", "kv_cache_dtype,cuda_graph_max_bs,concurrency",
                 "--format", "csv"]) in (0, None)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "kv_cache_dtype,cuda_graph_max_bs,concurrency"
    assert {ln.split(",")[0] for ln in out[1:]} == {"auto", "fp8_e5m2"}
    report = (tmp_path / "rep" / "kvd" / "report.md").read_text()
    assert "--kv-cache-dtype" in report
    with sqlite3.connect(db) as conn:
        ids = dict(conn.execute("SELECT json_extract(c.flags_json, '$.kv_cache_dtype'), MIN(r.id) FROM runs r "
                                "JOIN server_configs c ON c.id = r.server_config_id GROUP BY 1").fetchall())
    assert main(["compare", str(ids["auto"]), str(ids["fp8_e5m2"]), "--db", str(db)]) in (0, None)
    assert "| kv_cache_dtype | auto | fp8_e5m2 |" in capsys.readouterr().out  # a searched flag: one row each side
    answer = json.loads((tmp_path / "rep" / "kvd" / "answer.json").read_text())
    tier = answer["tiers"][0]
    assert answer["gpu_hour_usd"] == 3.5 and tier["gpus"] == 1
    assert tier["usd_per_mtok"] == pytest.approx(3.5 / 3600 / tier["knee"]["goodput_tps"] * 1e6)
    assert f"- **Cost**: ${tier['usd_per_mtok']:,.3f} per million output tokens at the knee (1 GPU at $3.50/GPU-hour)" \
        in report


def test_the_cost_per_token_counts_every_gpu_of_the_server() -> None:
    # two GPUs (tp_size 2) serving 1.5x the goodput of one cost more per token, not less
    one, two = usd_per_million_output(3.6, 1, 1000.0), usd_per_million_output(3.6, 2, 1500.0)
    assert one == pytest.approx(1.0) and two == pytest.approx(4 / 3)
    assert usd_per_million_output(None, 1, 1000.0) is None and usd_per_million_output(3.6, 1, 0.0) is None


def test_fixed_flags_come_from_extra_args_and_one_valued_space_flags() -> None:
    raw: dict[str, JSON] = {"server": {"extra_args": ["--load-format", "dummy", "--enable-mixed-chunk", "--chunked-prefill-size", "-1"]},
           "search": {"space": {"kv_cache_dtype": ["fp8_e5m2"], "cuda_graph_max_bs": [64, 256],
                                "disable_radix_cache": [False], "max_running_requests": [64]}}}
    assert fixed_flags_of(raw) == {"--load-format": "dummy", "--enable-mixed-chunk": "", "--chunked-prefill-size": "-1",
                                   "--kv-cache-dtype": "fp8_e5m2"}
    same: dict[str, JSON] = {"server": {"extra_args": ["--kv-cache-dtype", "fp8_e5m2"]}}
    assert differences(fixed_flags_of(same), {"--kv-cache-dtype": "fp8_e5m2"}) == []
    assert differences({"--kv-cache-dtype": "fp8_e5m2"}, {}) == ["--kv-cache-dtype fp8_e5m2 vs not set"]


def test_compare_and_history_refuse_studies_whose_fixed_flags_differ(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    for name, extra in (("bf16", '["--load-format","dummy"]'),
                        ("fp8", '["--load-format","dummy","--kv-cache-dtype","fp8_e5m2"]')):
        assert main(["ladder", "--profile", "smoke", "--db", db, "--out", str(tmp_path / "rep"), "--launcher", "sim",
                     "--driver", "virtual", "--study", name, "--config", "max_running_requests=8",
                     "--set", "ladder=[2]", "--set", f"server.extra_args={extra}"]) == 0
    capsys.readouterr()
    assert main(["compare", "bf16", "fp8", "--db", db]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == ["error: bf16 and fp8 ran with different fixed flags (--kv-cache-dtype not set vs fp8_e5m2): "
                   "different servers; pass --force to compare anyway"]
    assert main(["compare", "bf16", "fp8", "--db", db, "--force"]) in (0, None)
    assert "| kv_cache_dtype |" not in capsys.readouterr().out  # a fixed flag (extra_args): named in the warning
    assert main(["history", "--profile", "smoke", "--db", db]) == 2
    assert "ran with different fixed flags" in capsys.readouterr().err
    assert main(["history", "--profile", "smoke", "--db", db, "--force"]) in (0, None)


def test_the_prior_names_the_unmodelled_flags_that_vary() -> None:
    from sweep.study.prior import unmodelled_varying

    space: dict[str, list[FlagScalar]] = {"kv_cache_dtype": ["auto", "fp8_e5m2"], "attention_backend": ["triton", "flashinfer"],
             "page_size": [16], "cuda_graph_max_bs": [64, 256], "enable_mixed_chunk": [True, False]}
    assert unmodelled_varying(space) == ["attention_backend"]  # page_size is fixed; the others are modelled


@pytest.mark.integration
def test_windows_export_has_a_column_per_searched_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "r.db")
    assert main(["knee", "--profile", "smoke", "--db", db, "--out", str(tmp_path / "rep"), "--launcher", "sim",
                 "--driver", "virtual", "--no-progress", "--study", "x", "--set", "ladder=[2]",
                 "--set", "search.baseline=true",
                 "--set", 'search.space={"max_running_requests":[8],"kv_cache_dtype":["auto","fp8_e5m2"]}']) == 0
    out = tmp_path / "w.csv"
    assert main(["export", "x", "--db", db, "--what", "windows", "--format", "csv", "--out", str(out)]) in (0, None)
    lines = out.read_text().splitlines()
    col = lines[0].split(",").index("kv_cache_dtype")
    assert sorted(ln.split(",")[col] for ln in lines[1:]) == ["", "auto", "fp8_e5m2"]  # the defaults: unset


def test_the_auto_sampler_never_grids_a_continuous_range(tmp_path: Path) -> None:
    from sweep.study.sampler import sampler_kind

    stepped = load_profile(_profile(tmp_path, "    cuda_graph_max_bs: {low: 64, high: 256, step: 64}\n", "auto"))
    assert sampler_kind(stepped) == "grid"
    continuous = load_profile(_profile(tmp_path, "    cuda_graph_max_bs: {low: 64, high: 256, log: true}\n", "auto"))
    assert sampler_kind(continuous) == "tpe"  # its grid would be the two ends only


def test_study_labels_leave_out_the_flags_every_configuration_shares() -> None:
    from sweep.store.records import ConfigRecord, labels_of

    a = ConfigRecord(id=1, config=ServerConfig.of({"kv_cache_dtype": "fp8_e5m2", "cuda_graph_max_bs": 64}))
    b = ConfigRecord(id=2, config=ServerConfig.of({"kv_cache_dtype": "fp8_e5m2", "cuda_graph_max_bs": 256}))
    defaults = ConfigRecord(id=3, config=ServerConfig())
    assert labels_of([a, b, defaults]) == {1: "cuda_graph_max_bs=64", 2: "cuda_graph_max_bs=256", 3: "defaults"}
    assert labels_of([a]) == {1: "cuda_graph_max_bs=64 kv_cache_dtype=fp8_e5m2"}  # alone, its label says all
