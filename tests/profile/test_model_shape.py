"""One model, from the model folder (issue 21 §1): config.json is the shape; a sim preset only without one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_sim.params import MODELS, model_preset
from sglang_sim.shape import FALLBACK_MODEL, ModelConflict, choose_model, model_from_config
from sweep.core.errors import ProfileError
from sweep.profile import load_profile
from sweep.study.orchestrator import Orchestrator

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = ROOT / "models"


def _folder(tmp_path: Path, cfg: dict[str, object], name: str = "m") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_the_repo_folders_are_their_config_shapes() -> None:
    shape = choose_model(MODELS_DIR / "llama3-8b-shape")
    assert (shape.layers, shape.kv_heads, shape.head_dim, shape.context_len) == (32, 8, 128, 32768)
    assert shape.params == pytest.approx(model_preset("llama3-8b-shape").params, rel=1e-6)  # 6.99e9: vocab 1,024, not Llama-3-8B's 128,256
    assert shape.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    vl = choose_model(MODELS_DIR / "qwen2.5-vl-7b-shape")
    assert (vl.layers, vl.hidden, vl.heads, vl.kv_heads, vl.head_dim) == (28, 3584, 28, 4, 128)
    assert 0.6e9 < vl.vision_params < 0.7e9 and vl.context_len == 128000  # the ViT counted in the weights
    tiny = choose_model(MODELS_DIR / "tiny-llama")
    assert (tiny.layers, tiny.hidden, tiny.kv_heads, tiny.head_dim) == (2, 256, 2, 64)


def test_llama_qwen_mistral_and_mixtral_configs(tmp_path: Path) -> None:
    qwen = model_from_config(_folder(tmp_path, {  # Qwen2.5-0.5B: no head_dim (896/14 = 64), tied embeddings
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}, "qwen"))
    assert qwen is not None and qwen.head_dim == 64 and qwen.kv_bytes_per_token == 2 * 24 * 2 * 64 * 2
    assert 0.45e9 < qwen.params < 0.5e9  # 0.49e9 on the model card (tied: one embedding matrix)
    mistral = model_from_config(_folder(tmp_path, {  # Mistral-7B-v0.1
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096,
        "max_position_embeddings": 32768, "torch_dtype": "float32"}, "mistral"))
    assert mistral is not None and mistral.dtype_bytes == 2  # served as bf16 under --dtype auto
    assert 7.1e9 < mistral.params < 7.3e9  # 7.24e9
    mixtral = model_from_config(_folder(tmp_path, {  # Mixtral-8x7B: every expert resident
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
        "num_experts_per_tok": 2}, "mixtral"))
    assert mixtral is not None and 46e9 < mixtral.params < 47.5e9  # 46.7e9
    nested = model_from_config(_folder(tmp_path, {"text_config": {  # newer VL configs nest the LLM
        "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1024}}, "nested"))
    assert nested is not None and nested.kv_heads == 4 and nested.head_dim == 64


def test_a_config_json_that_is_no_model_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"config.json: no hidden_size \(not a Llama/Qwen/Mistral"):
        model_from_config(_folder(tmp_path, {"model_type": "bert"}))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        choose_model(bad)


def test_the_folder_wins_a_preset_fills_in_and_a_contradiction_is_refused(tmp_path: Path) -> None:
    assert choose_model(tmp_path / "nowhere", "qwen2.5-vl-7b") == MODELS["qwen2.5-vl-7b"]  # no config.json
    assert choose_model("meta-llama/Meta-Llama-3-8B") == MODELS[FALLBACK_MODEL]  # neither
    agreeing = choose_model(MODELS_DIR / "llama3-8b-shape", "llama3-8b-shape")
    assert agreeing == choose_model(MODELS_DIR / "llama3-8b-shape")
    # The case: the full Llama-3-8B named beside the 1,024-vocab folder (a KV pool 29% too small)
    with pytest.raises(ModelConflict) as err:
        choose_model(MODELS_DIR / "llama3-8b-shape", "llama3-8b")
    msg = str(err.value)
    assert "\n" not in msg and "'llama3-8b'" in msg and "llama3-8b-shape/config.json" in msg
    assert "weights 14.96 vs 13.02 GiB" in msg
    with pytest.raises(ModelConflict, match="kv_heads 4 vs 8"):  # a tmp folder of another shape
        choose_model(_folder(tmp_path, {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                                        "num_key_value_heads": 8, "vocab_size": 1024}), "qwen2.5-vl-7b")


def test_a_study_refuses_the_contradiction_before_anything_is_written(tmp_path: Path) -> None:
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"server.sim_model": "llama3-8b"})
    db = tmp_path / "r.db"
    with pytest.raises(ProfileError, match=r"server.sim_model / server.model_path: sim model 'llama3-8b'"):
        Orchestrator(prof, f"sqlite:///{db}", tmp_path, driver="virtual")
    assert not db.exists()
    ok = load_profile(ROOT / "profiles" / "smoke.yaml", {"server.sim_model": "llama3-8b",
                                                          "server.model_path": "meta-llama/Meta-Llama-3-8B"})
    assert Orchestrator(ok, f"sqlite:///{db}", tmp_path, driver="virtual").model == MODELS["llama3-8b"]


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", "smoke", "--db",
                          str(tmp_path / "r.db"), "--driver", "virtual", "--set", "server.sim_model=llama3-8b",
                          "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    assert run.returncode == 2 and len(lines) == 1, run.stdout + run.stderr
    assert "llama3-8b-shape/config.json" in lines[0] and "'llama3-8b'" in lines[0]
    assert not (tmp_path / "r.db").exists()
