"""OLMoE (AI2's ``OlmoeForCausalLM``): Llama's pre-norm layout with RMS norms on the queries
and keys over all heads of a position at once (``q_norm`` over n_heads * head_dim, as OLMo 2's:
``qk_norm_across_heads``), and a mixture-of-experts MLP of ``num_experts`` experts of
``intermediate_size``, whose top-k weights are renormalised only with ``norm_topk_prob``.
``clip_qkv`` (clamping q, k and v) is refused: the published checkpoints leave it null."""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import flag
from interp.loading.families.llama import LLAMA_DEFAULTS, llama_like_config, llama_like_table
from interp.loading.families.mixtral import LLAMA_EXPERT, moe_config, with_experts

# OlmoeConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = LLAMA_DEFAULTS | dict(
    vocab_size=50304,
    hidden_size=2048,
    intermediate_size=2048,
    num_hidden_layers=16,
    num_attention_heads=16,
    num_key_value_heads=16,
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    clip_qkv=None,
    num_experts_per_tok=8,
    num_experts=64,
    norm_topk_prob=False,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    if values.get("clip_qkv") is not None:
        raise ValueError(
            f"field 'clip_qkv' is {values['clip_qkv']!r}: interp's attention does not clamp "
            "queries, keys and values; only OLMoE checkpoints with clip_qkv: null load."
        )
    return (
        llama_like_config(values)
        | moe_config(values, "num_experts", "intermediate_size")
        | dict(use_qk_norm=True, qk_norm_across_heads=True)
    )


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    bias = flag(values, "attention_bias")
    n_kv = cfg.n_key_value_heads or cfg.n_heads
    across_heads = {"q_norm": cfg.n_heads * cfg.d_head, "k_norm": n_kv * cfg.d_head}
    rows = []
    for row in llama_like_table(cfg, qkv_bias=bias, o_bias=bias):
        norm = (row.checkpoint or "").removesuffix(".weight").rsplit(".", 1)[-1]
        if norm in across_heads:  # Llama's table has per-head QK norms: these span all heads
            row = Row(row.checkpoint, (across_heads[norm],), row.convert)
        rows.append(row)
    return with_experts(cfg, rows, "mlp.", LLAMA_EXPERT)


OLMOE = Family(
    name="OLMoE",
    architectures=("OlmoeForCausalLM",),
    model_types=("olmoe",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
