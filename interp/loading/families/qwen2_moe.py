"""Qwen2-MoE (``Qwen2MoeForCausalLM``, Qwen1.5-MoE): Qwen 2's attention (q/k/v biases,
``qkv_bias``) with a mixture-of-experts MLP of ``num_experts`` experts of
``moe_intermediate_size``, whose top-k weights are not renormalised by default
(``norm_topk_prob: false``), plus a shared expert of ``shared_expert_intermediate_size`` on
every token, scaled by ``sigmoid(shared_expert_gate(x))``.

Layers with a dense MLP instead (``mlp_only_layers``, or ``decoder_sparse_step`` above 1)
and the sliding window (``use_sliding_window``) are refused: no published checkpoint has them.
"""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import flag, positive_int
from interp.loading.families.llama import llama_like_config, llama_like_table
from interp.loading.families.mixtral import LLAMA_EXPERT, moe_config, with_experts
from interp.loading.families.qwen import QWEN2_DEFAULTS

# Qwen2MoeConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = QWEN2_DEFAULTS | dict(
    hidden_size=2048,
    intermediate_size=5632,
    num_hidden_layers=24,
    num_attention_heads=16,
    num_key_value_heads=16,
    decoder_sparse_step=1,
    moe_intermediate_size=1408,
    shared_expert_intermediate_size=5632,
    num_experts_per_tok=4,
    num_experts=60,
    norm_topk_prob=False,
    mlp_only_layers=[],
    qkv_bias=True,
)


def check_all_sparse(values: dict[str, Any]) -> None:
    """Refuse a Qwen MoE config with dense-MLP layers (``mlp_only_layers``, or a
    ``decoder_sparse_step`` that skips layers) or a sliding window, naming the field."""
    n_layers = positive_int(values, "num_hidden_layers")
    dense = list(values.get("mlp_only_layers") or [])
    step = positive_int(values, "decoder_sparse_step")
    dense += [layer for layer in range(n_layers) if (layer + 1) % step]
    if dense:
        raise ValueError(
            f"fields 'mlp_only_layers' ({values.get('mlp_only_layers')!r}) and "
            f"'decoder_sparse_step' ({step}) give layers {sorted(set(dense))} a dense MLP; "
            "interp loads Qwen MoE checkpoints whose every layer is a mixture of experts "
            "(mlp_only_layers: [], decoder_sparse_step: 1)."
        )
    if flag(values, "use_sliding_window"):
        raise ValueError(
            "field 'use_sliding_window' is true: interp does not load Qwen MoE checkpoints "
            "with a sliding window; set it to false if the checkpoint was trained without one."
        )


def config(values: dict[str, Any]) -> dict[str, Any]:
    check_all_sparse(values)
    return (
        llama_like_config(values)
        | moe_config(values, "num_experts", "moe_intermediate_size")
        | dict(
            d_mlp_shared_expert=positive_int(values, "shared_expert_intermediate_size"),
            default_prepend_bos=False,
        )
    )


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    rows = llama_like_table(cfg, qkv_bias=flag(values, "qkv_bias"))
    return with_experts(cfg, rows, "mlp.", LLAMA_EXPERT)


QWEN2_MOE = Family(
    name="Qwen2-MoE",
    architectures=("Qwen2MoeForCausalLM",),
    model_types=("qwen2_moe",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
