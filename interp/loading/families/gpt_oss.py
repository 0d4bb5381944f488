"""gpt-oss (OpenAI's ``GptOssForCausalLM``): Llama's layout with biases on q/k/v/o, a
learned attention sink per head (``self_attn.sinks`` -> ``attn.W_sinks``), sliding-window
and full layers as ``layer_types`` says, YaRN rope scaling, and a mixture of experts
(``interp.components.moe_gpt_oss``) whose router and experts have biases.

The experts are fused per layer: ``gate_up_proj`` [experts, d_model, 2 d_mlp] with the
gate and up columns interleaved (gate at even columns, up at odd ones, as Hugging Face's
``GptOssExperts._apply_gate`` reads them), ``down_proj`` [experts, d_mlp, d_model], and
their biases. The published checkpoints store both weights in MXFP4
(``*_blocks``/``*_scales``, ``quantization_config.quant_method: "mxfp4"``); they stay MXFP4
in memory (``cfg.experts_mxfp4``: each expert's rows of the blocks and scales, dequantized in
its forward, ``interp.components.mxfp4_experts``), unless ``quantization_config.dequantize``
is true (transformers' ``Mxfp4Config(dequantize=True)``; ``from_pretrained(...,
dequantize_experts=True)`` sets it): then they are dequantized as they are read
(``interp.components.mxfp4``), one tensor at a time, to the same numbers.
"""

from __future__ import annotations

import math
from typing import Any

from torch import Tensor

from interp.components.mxfp4 import VALUES_PER_BLOCK, dequantize_mxfp4
from interp.config import HookedTransformerConfig
from interp.loading.families.base import Convert, Family, Row
from interp.loading.families.config_fields import (
    flag,
    positive_int,
    positive_number,
    rope_field_names,
    rope_number,
    rope_parameters,
    sliding_layers,
    window_fields,
)
from interp.loading.families.converters import (
    embedding,
    heads_bias,
    heads_in,
    heads_out,
    same,
    transposed,
    unembedding_rows,
    zeros,
)
from interp.loading.families.llama import LLAMA_DEFAULTS, llama_like_config

# GptOssConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = LLAMA_DEFAULTS | dict(
    num_hidden_layers=36,
    num_local_experts=128,
    vocab_size=201088,
    hidden_size=2880,
    intermediate_size=2880,
    head_dim=64,
    num_attention_heads=64,
    num_key_value_heads=8,
    sliding_window=128,
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    num_experts_per_tok=4,
    swiglu_alpha=1.702,
    swiglu_limit=7.0,
    attention_bias=True,
    rope_theta=150000.0,  # GptOssConfig.default_theta
)
# GptOssConfig's rope settings when config.json has neither rope_parameters nor the older
# rope_scaling (a default for the whole setting, not per field: rope_scaling's own win).
DEFAULT_ROPE = dict(
    rope_type="yarn",
    factor=32.0,
    beta_fast=32.0,
    beta_slow=1.0,
    truncate=False,
    original_max_position_embeddings=4096,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    n_layers = positive_int(values, "num_hidden_layers")
    if values.get("rope_parameters") is None and values.get("rope_scaling") is None:
        values = values | dict(rope_parameters=DEFAULT_ROPE | dict(rope_theta=values["rope_theta"]))
    rope = rope_parameters(values)
    where, theta_field = rope_field_names(values)
    if rope["rope_type"] not in ("yarn", "default"):
        raise ValueError(
            f"rope type {rope['rope_type']!r} (field {where!r}) is not supported for gpt-oss; "
            "interp supports 'yarn' (gpt-oss's own) and 'default'."
        )
    theta = rope_number(rope, "rope_theta", theta_field, 150000.0, rope["rope_type"])
    default_rope = dict(rope_type="default", rope_theta=theta)
    fields = llama_like_config(values | dict(rope_parameters=default_rope, rope_scaling=None))
    if rope["rope_type"] == "yarn":
        fields |= yarn_fields(values, rope, where)
    sliding = sliding_layers(values, [(layer + 1) % 2 == 1 for layer in range(n_layers)])
    window = values.get("sliding_window")
    if window is not None and not any(sliding):
        raise ValueError(
            f"field 'sliding_window' is {window!r}, but field 'layer_types' has no "
            "'sliding_attention' layer to apply it to; mark the windowed layers "
            "'sliding_attention', or set sliding_window to null."
        )
    if window is None and any(sliding):
        raise ValueError(
            "field 'layer_types' has 'sliding_attention' layers, but field 'sliding_window' is "
            "null; set sliding_window to the window's length (128 for gpt-oss)."
        )
    n_experts = positive_int(values, "num_local_experts")
    return (
        fields
        | window_fields(window, sliding)
        | dict(
            num_experts=n_experts,
            experts_per_token=positive_int(values, "num_experts_per_tok"),
            experts_swiglu_limit=positive_number(values, "swiglu_limit", 7.0),
            experts_swiglu_alpha=positive_number(values, "swiglu_alpha", 1.702),
            use_attn_sinks=True,
            rmsnorm_weight_in_float32=True,  # GptOssRMSNorm multiplies in float32, then casts
            experts_mxfp4=kept_mxfp4(values, fields["d_model"], fields["d_mlp"]),
        )
    )


def yarn_fields(values: dict[str, Any], rope: dict[str, Any], where: str) -> dict[str, Any]:
    """YaRN's config fields as Hugging Face's ``_compute_yarn_parameters`` reads them: the
    factor (given, else ``max_position_embeddings / original``), the original context (of
    the rope settings, else ``max_position_embeddings``), the band's rotations (32 and 1
    when absent), ``truncate`` (true when absent) and the attention factor (given, else
    from ``mscale``/``mscale_all_dim`` when both are set, else ``0.1 ln(factor) + 1``)."""
    original = rope.get("original_max_position_embeddings")
    if original is None:
        original = positive_int(values, "max_position_embeddings")
    if isinstance(original, bool) or not isinstance(original, int) or original <= 0:
        raise ValueError(
            f"field '{where}.original_max_position_embeddings' is {original!r}; it must be a "
            "positive integer, the context length the model was trained with (4096 for "
            "gpt-oss)."
        )
    if rope.get("factor") is None:
        factor = positive_int(values, "max_position_embeddings") / original
    else:
        factor = rope_number(rope, "factor", f"{where}.factor", 32.0, "yarn")
    band = {}
    for name, default in (("beta_fast", 32.0), ("beta_slow", 1.0)):
        given = rope.get(name) or default  # Hugging Face: `or`, so 0 is the default too
        band[name] = rope_number({name: given}, name, f"{where}.{name}", default, "yarn")
    truncate = rope.get("truncate", True)
    if not isinstance(truncate, bool):
        raise ValueError(f"field '{where}.truncate' is {truncate!r}; it must be true or false.")
    attention = rope.get("attention_factor")
    if attention is not None:
        attention = rope_number(rope, "attention_factor", f"{where}.attention_factor", 1.0, "yarn")
    elif rope.get("mscale") and rope.get("mscale_all_dim"):
        attention = _mscale(factor, rope["mscale"]) / _mscale(factor, rope["mscale_all_dim"])
    return dict(
        use_yarn_rope=True,
        yarn_factor=float(factor),
        yarn_original_ctx_len=original,
        yarn_beta_fast=band["beta_fast"],
        yarn_beta_slow=band["beta_slow"],
        yarn_truncate=truncate,
        yarn_attention_factor=attention,
    )


def _mscale(factor: float, mscale: float) -> float:
    """Hugging Face's ``get_mscale``."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _experts(ours: str, name: str, n_experts: int) -> Convert:
    """A fused expert tensor ([experts, ...] in Hugging Face's layout) as each expert's
    parameters: ``gate_up_proj`` (interleaved columns) as ``W_gate``/``W_in``, its bias as
    ``b_gate``/``b_in``, ``down_proj`` as ``W_out`` and its bias as ``b_out``."""

    def convert(tensor: Tensor) -> dict[str, Tensor]:
        converted = {}
        for expert in range(n_experts):
            prefix, fused = f"{ours}experts.{expert}.", tensor[expert]
            if name in ("gate_up_proj", "gate_up_proj_bias"):
                kind = "W" if name == "gate_up_proj" else "b"
                converted[f"{prefix}{kind}_gate"] = fused[..., 0::2]
                converted[f"{prefix}{kind}_in"] = fused[..., 1::2]
            else:
                converted[prefix + ("W_out" if name == "down_proj" else "b_out")] = fused
        return converted

    return convert


def _mxfp4_rows(
    hf: str,
    ours: str,
    name: str,
    n_experts: int,
    rows: int,
    columns: int,
    cfg: HookedTransformerConfig,
) -> list[Row]:
    """The ``*_blocks`` and ``*_scales`` rows of an MXFP4 expert weight ([experts, columns,
    rows] once dequantized): the blocks are kept until their scales arrive, next."""
    pending: dict[str, Tensor] = {}
    n_blocks = columns // VALUES_PER_BLOCK

    def keep_blocks(blocks: Tensor) -> dict[str, Tensor]:
        pending["blocks"] = blocks
        return {}

    def dequantize(scales: Tensor) -> dict[str, Tensor]:
        weight = dequantize_mxfp4(pending.pop("blocks"), scales, cfg.dtype)
        return _experts(ours, name, n_experts)(weight)

    return [
        Row(f"{hf}{name}_blocks", (n_experts, rows, n_blocks, VALUES_PER_BLOCK // 2), keep_blocks),
        Row(f"{hf}{name}_scales", (n_experts, rows, n_blocks), dequantize),
    ]


def _kept_mxfp4_rows(
    hf: str, ours: str, name: str, n_experts: int, rows: int, columns: int
) -> list[Row]:
    """The ``*_blocks`` and ``*_scales`` rows of an MXFP4 expert weight kept in MXFP4: each
    expert's rows (gate_up_proj's even rows are W_gate's, its odd rows W_in's)."""
    n_blocks = columns // VALUES_PER_BLOCK

    def split(kind: str) -> Convert:
        def convert(tensor: Tensor) -> dict[str, Tensor]:  # [experts, rows, n_blocks, ...]
            converted = {}
            for expert in range(n_experts):
                prefix = f"{ours}experts.{expert}."
                if name == "gate_up_proj":
                    converted[f"{prefix}W_gate_{kind}"] = tensor[expert, 0::2]
                    converted[f"{prefix}W_in_{kind}"] = tensor[expert, 1::2]
                else:
                    converted[f"{prefix}W_out_{kind}"] = tensor[expert]
            return converted

        return convert

    return [
        Row(
            f"{hf}{name}_blocks",
            (n_experts, rows, n_blocks, VALUES_PER_BLOCK // 2),
            split("blocks"),
        ),
        Row(f"{hf}{name}_scales", (n_experts, rows, n_blocks), split("scales")),
    ]


def kept_mxfp4(values: dict[str, Any], d_model: int, d_mlp: int) -> bool:
    """Whether the experts stay MXFP4 in memory: an MXFP4 checkpoint not asked to be
    dequantized (sizes that are not whole blocks are refused by ``table``, naming them)."""
    whole = d_model % VALUES_PER_BLOCK == 0 and d_mlp % VALUES_PER_BLOCK == 0
    return is_mxfp4(values) and not dequantized(values) and whole


def dequantized(values: dict[str, Any]) -> bool:
    """Whether config.json asks for MXFP4 experts dequantized at load
    (``quantization_config.dequantize``, transformers' ``Mxfp4Config`` field)."""
    value = (values.get("quantization_config") or {}).get("dequantize", False)
    if not isinstance(value, bool):
        raise ValueError(
            f"field 'quantization_config.dequantize' is {value!r}; it must be true or false."
        )
    return value


def is_mxfp4(values: dict[str, Any]) -> bool:
    """Whether config.json says the experts are stored in MXFP4 (the published checkpoints)."""
    quantization = values.get("quantization_config") or {}
    if not isinstance(quantization, dict):
        raise ValueError(f"field 'quantization_config' is {quantization!r}; it must be an object.")
    method = quantization.get("quant_method")
    if method not in (None, "mxfp4"):
        raise ValueError(
            f"field 'quantization_config.quant_method' is {method!r}; interp reads gpt-oss's "
            "experts unquantized or in MXFP4 only."
        )
    return method == "mxfp4"


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    n_kv = cfg.n_key_value_heads or h
    n_experts = cfg.num_experts
    grouped = "_" if n_kv != h else ""
    bias = flag(values, "attention_bias")
    mxfp4 = is_mxfp4(values)
    if mxfp4 and (m % VALUES_PER_BLOCK or mlp % VALUES_PER_BLOCK):
        raise ValueError(
            f"MXFP4 experts need hidden_size ({m}) and intermediate_size ({mlp}) to be "
            f"multiples of {VALUES_PER_BLOCK} (one scale a block of {VALUES_PER_BLOCK} values)."
        )
    tied = cfg.tie_word_embeddings
    rows = [Row("model.embed_tokens.weight", (cfg.d_vocab, m), embedding(cfg, tied))]
    for layer in range(cfg.n_layers):
        hf, ours = f"model.layers.{layer}.", f"blocks.{layer}."
        attn, kv_attn = ours + "attn.", f"{ours}attn.{grouped}"
        rows += [
            Row(hf + "input_layernorm.weight", (m,), same(ours + "ln1.w")),
            Row(hf + "self_attn.q_proj.weight", (h * d, m), heads_in(attn + "W_Q", h)),
            Row(hf + "self_attn.k_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_K", n_kv)),
            Row(hf + "self_attn.v_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_V", n_kv)),
            Row(hf + "self_attn.o_proj.weight", (m, h * d), heads_out(attn + "W_O", h)),
            Row(hf + "self_attn.sinks", (h,), same(attn + "W_sinks")),
        ]
        if bias:
            rows += [
                Row(hf + "self_attn.q_proj.bias", (h * d,), heads_bias(attn + "b_Q", h)),
                Row(hf + "self_attn.k_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_K", n_kv)),
                Row(hf + "self_attn.v_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_V", n_kv)),
                Row(hf + "self_attn.o_proj.bias", (m,), same(attn + "b_O")),
            ]
        else:
            rows += [
                zeros(attn + "b_Q", (h, d)),
                zeros(kv_attn + "b_K", (n_kv, d)),
                zeros(kv_attn + "b_V", (n_kv, d)),
                zeros(attn + "b_O", (m,)),
            ]
        experts, ours_mlp = hf + "mlp.experts.", ours + "mlp."
        rows += [
            Row(hf + "post_attention_layernorm.weight", (m,), same(ours + "ln2.w")),
            Row(hf + "mlp.router.weight", (n_experts, m), transposed(ours_mlp + "W_gate")),
            Row(hf + "mlp.router.bias", (n_experts,), same(ours_mlp + "b_gate")),
        ]
        if mxfp4 and cfg.experts_mxfp4:
            rows += _kept_mxfp4_rows(experts, ours_mlp, "gate_up_proj", n_experts, 2 * mlp, m)
            rows += _kept_mxfp4_rows(experts, ours_mlp, "down_proj", n_experts, m, mlp)
        elif mxfp4:
            rows += _mxfp4_rows(experts, ours_mlp, "gate_up_proj", n_experts, 2 * mlp, m, cfg)
            rows += _mxfp4_rows(experts, ours_mlp, "down_proj", n_experts, m, mlp, cfg)
        else:
            rows += [
                Row(
                    experts + "gate_up_proj",
                    (n_experts, m, 2 * mlp),
                    _experts(ours_mlp, "gate_up_proj", n_experts),
                ),
                Row(
                    experts + "down_proj",
                    (n_experts, mlp, m),
                    _experts(ours_mlp, "down_proj", n_experts),
                ),
            ]
        rows += [
            Row(
                experts + "gate_up_proj_bias",
                (n_experts, 2 * mlp),
                _experts(ours_mlp, "gate_up_proj_bias", n_experts),
            ),
            Row(
                experts + "down_proj_bias",
                (n_experts, m),
                _experts(ours_mlp, "down_proj_bias", n_experts),
            ),
        ]
    rows.append(Row("model.norm.weight", (m,), same("ln_final.w")))
    return rows + unembedding_rows(cfg, tied)


GPT_OSS = Family(
    name="gpt-oss",
    architectures=("GptOssForCausalLM",),
    model_types=("gpt_oss",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
