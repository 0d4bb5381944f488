"""Qwen3-MoE (``Qwen3MoeForCausalLM``): Qwen 3's attention (per-head QK norms, no biases)
with a mixture-of-experts MLP of ``num_experts`` experts of ``moe_intermediate_size`` (no
shared expert); ``norm_topk_prob`` says whether the top-k weights are renormalised (the
published checkpoints set it). transformers 5 writes the expert count as
``num_local_experts``, the published config.json files as ``num_experts``: either is read.
Dense-MLP layers and sliding windows are refused, as for Qwen2-MoE."""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import flag
from interp.loading.families.llama import llama_like_config, llama_like_table
from interp.loading.families.mixtral import LLAMA_EXPERT, moe_config, with_experts
from interp.loading.families.qwen import QWEN2_DEFAULTS
from interp.loading.families.qwen2_moe import check_all_sparse

# Qwen3MoeConfig's defaults (transformers 5), for fields a config.json leaves out (no
# head_dim: without one, a head is hidden_size / num_attention_heads, as Hugging Face's).
DEFAULTS = QWEN2_DEFAULTS | dict(
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=24,
    num_attention_heads=32,
    num_key_value_heads=4,
    decoder_sparse_step=1,
    moe_intermediate_size=768,
    num_experts_per_tok=8,
    norm_topk_prob=False,
    mlp_only_layers=[],
)
DEFAULT_EXPERTS = 128


def config(values: dict[str, Any]) -> dict[str, Any]:
    check_all_sparse(values)
    experts_field = "num_experts" if "num_experts" in values else "num_local_experts"
    values = {experts_field: DEFAULT_EXPERTS} | values
    return (
        llama_like_config(values)
        | moe_config(values, experts_field, "moe_intermediate_size")
        | dict(use_qk_norm=True, default_prepend_bos=False)
    )


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    bias = flag(values, "attention_bias")
    rows = llama_like_table(cfg, qkv_bias=bias, o_bias=bias)
    return with_experts(cfg, rows, "mlp.", LLAMA_EXPERT)


QWEN3_MOE = Family(
    name="Qwen3-MoE",
    architectures=("Qwen3MoeForCausalLM",),
    model_types=("qwen3_moe",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
