"""The model a server runs, from its model folder: a HF config.json read into a ModelPreset, or a named preset.

One rule (`choose_model`) for the simulated server, sweep's launchers and `tools/calibrate.py`: the folder's
config.json is the model when it exists; a named preset (`--sim-model`, the profile's `server.sim_model`) is for
a model path without one (a hub name, a folder on another machine). Both given and different: ModelConflict.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from sglang_sim.params import GIB, MODELS, ModelPreset, model_preset

FALLBACK_MODEL = "llama3-8b"  # neither a config.json nor a preset named: the shape SGLang's docs launch
# torch_dtype -> bytes per weight and per KV element under SGLang's `--dtype auto`: float32 checkpoints are
# served in bfloat16 (model_config._get_and_verify_dtype), so every dtype a config names serves as 2 bytes.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}
# Shape fields that must agree between a preset and a config.json (they set KV bytes per token and step costs)
SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "dtype_bytes")
WEIGHT_TOLERANCE = 0.02  # relative difference of weight bytes still called the same model (norms, biases)


class ModelConflict(ValueError):
    """A preset was named for a model path whose config.json describes another shape."""


def _int(d: dict[str, Any], key: str, default: int | None = None) -> int:
    v = d.get(key, default)
    if v is None:
        raise KeyError(key)
    return int(v)


def _vision_params(vc: dict[str, Any], text_hidden: int) -> float:
    """A Qwen2-VL-style vision tower: ViT blocks (attention 4 vh^2 + gated MLP 3 vh vi) plus the patch merger."""
    vh = int(vc["hidden_size"])
    vd = int(vc.get("depth") or vc.get("num_hidden_layers") or 0)
    vi = int(vc.get("intermediate_size", 4 * vh))
    merge = int(vc.get("spatial_merge_size", 2))
    out = int(vc.get("out_hidden_size", text_hidden))
    return float(vd * (4 * vh * vh + 3 * vh * vi) + (vh * merge * merge) ** 2 + vh * merge * merge * out)


def _mlp_params(text: dict[str, Any], h: int) -> int:
    """Parameters of one layer's MLP: dense gated (3 h i), or a mixture of experts (Mixtral, Qwen-MoE) with its
    router and shared expert. Every expert is resident on the GPU, so all count toward the weights."""
    experts = int(text.get("num_local_experts") or text.get("num_experts") or 0)
    if experts <= 1:
        return 3 * h * _int(text, "intermediate_size", 4 * h)
    inter = int(text.get("moe_intermediate_size") or text.get("intermediate_size") or 4 * h)
    shared = int(text.get("shared_expert_intermediate_size") or 0)
    return experts * 3 * h * inter + h * experts + (3 * h * shared + h if shared else 0)


def model_from_config(path: str | Path, tp: int = 1) -> ModelPreset | None:
    """The shape in `path`/config.json as a preset (params counted from the shape), or None when there is no
    config.json. Llama, Mistral, Mixtral, Qwen2/2.5/3 (dense and MoE) and Qwen2.5-VL (text fields at the top or
    under text_config, the vision tower under vision_config) read the same fields. A config.json that exists
    but is not such a config raises ValueError naming the file and the missing field.

    Counted: q/o and k/v projections, the MLP, input embeddings and an untied lm_head (norms and biases,
    < 0.01% of an 8B model, are not). KV bytes per token follow from layers x KV heads x head_dim x dtype.
    """
    cfg_path = Path(path) / "config.json"
    if not cfg_path.is_file():
        return None
    try:
        cfg = json.loads(cfg_path.read_text())
        text = cfg.get("text_config") or cfg
        h, layers = _int(text, "hidden_size"), _int(text, "num_hidden_layers")
        heads = _int(text, "num_attention_heads")
        kv = _int(text, "num_key_value_heads", heads)
        hd = int(text.get("head_dim") or h // heads)
        vocab = _int(text, "vocab_size", 32000)
        per_layer = 2 * h * heads * hd + 2 * h * kv * hd + _mlp_params(text, h)
        ctx = int(text.get("max_position_embeddings") or cfg.get("max_position_embeddings") or 8192)
        dtype = str(text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or "bfloat16")
        vc = cfg.get("vision_config")
        vision = _vision_params(vc, h) if isinstance(vc, dict) and "hidden_size" in vc else 0.0
    except OSError as exc:
        raise ValueError(f"{cfg_path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cfg_path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except KeyError as exc:
        raise ValueError(f"{cfg_path}: no {exc.args[0]} (not a Llama/Qwen/Mistral-family config)") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{cfg_path}: unreadable model shape ({exc})") from None
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"{cfg_path}: torch_dtype {dtype!r} (the simulator knows {', '.join(DTYPE_BYTES)})")
    tied = bool(text.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False)))
    params = layers * per_layer + vocab * h * (1 if tied else 2)
    return ModelPreset(Path(path).resolve().name, layers, h, heads, kv, hd, float(params), ctx,
                       vision_params=vision, tp=tp, dtype_bytes=DTYPE_BYTES[dtype])


def differences(a: ModelPreset, b: ModelPreset) -> list[str]:
    """What differs between two shapes that changes the KV pool or the step times ([] = the same model)."""
    out = [f"{f} {getattr(a, f)} vs {getattr(b, f)}" for f in SHAPE_FIELDS if getattr(a, f) != getattr(b, f)]
    wa, wb = (m.params + m.vision_params for m in (a, b))
    if abs(wa - wb) > WEIGHT_TOLERANCE * max(wa, wb):
        out.append(f"weights {wa * a.dtype_bytes / GIB:.2f} vs {wb * b.dtype_bytes / GIB:.2f} GiB")
    return out


def choose_model(model_path: str | Path, sim_model: str | None = None) -> ModelPreset:
    """The model a server at `model_path` runs: its config.json's shape; else the named preset `sim_model`;
    else FALLBACK_MODEL. A preset named for a folder whose config.json differs in shape or weights (by
    `differences`) raises ModelConflict naming both, as one line; an unknown preset raises ValueError.
    An agreeing preset lends its TP size (llama3-70b's 4); `params.with_tp` applies a --tp-size."""
    preset = model_preset(sim_model) if sim_model else None
    found = model_from_config(model_path)
    if found is None:
        return preset or MODELS[FALLBACK_MODEL]
    if preset is not None:
        diff = differences(preset, found)
        if diff:
            raise ModelConflict(
                f"sim model {sim_model!r} disagrees with {Path(model_path) / 'config.json'} ({'; '.join(diff)}): "
                "the config.json is the model; name a sim model only for a model path without one")
        return replace(found, tp=preset.tp)
    return found

