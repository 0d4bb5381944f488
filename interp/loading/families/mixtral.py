"""Mixtral (``MixtralForCausalLM``): Mistral's attention and norms with a mixture-of-experts
MLP (``interp.components.moe``): a router ``block_sparse_moe.gate`` over
``num_local_experts`` SwiGLU experts (``w1`` gate, ``w3`` up, ``w2`` down), of which each token
takes ``num_experts_per_tok``, their softmax weights renormalised and applied in float32.

``moe_config`` and ``expert_rows`` are the routing fields and the expert tensors of every
mixture-of-experts family on Llama's layout (Qwen2-MoE, Qwen3-MoE and OLMoE reuse them);
``with_experts`` puts them in Llama's table in place of the dense MLP's rows.
"""

from __future__ import annotations

import re
from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import flag, positive_int
from interp.loading.families.converters import transposed
from interp.loading.families.llama import MISTRAL_DEFAULTS, llama_like_table, mistral_config

# MixtralConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = MISTRAL_DEFAULTS | dict(
    max_position_embeddings=4096 * 32,
    rms_norm_eps=1e-5,
    sliding_window=None,
    rope_theta=1e6,
    num_local_experts=8,
    num_experts_per_tok=2,
)
# Hugging Face's names for an expert's gate, up and down projections, per family.
MIXTRAL_EXPERT = ("w1", "w3", "w2")
LLAMA_EXPERT = ("gate_proj", "up_proj", "down_proj")
# A dense MLP's tensor in Llama's table: the checkpoint's, or our zero bias.
_DENSE_MLP = re.compile(r"^(?:model\.layers|blocks)\.(\d+)\.mlp\.")


def moe_config(values: dict[str, Any], experts_field: str, d_mlp_field: str) -> dict[str, Any]:
    """The mixture-of-experts fields: ``experts_field`` experts of ``d_mlp_field`` each,
    ``num_experts_per_tok`` of them per token; ``norm_topk_prob`` where the config has it
    (Mixtral always renormalises)."""
    fields = dict(
        num_experts=positive_int(values, experts_field),
        experts_per_token=positive_int(values, "num_experts_per_tok"),
        d_mlp=positive_int(values, d_mlp_field),
    )
    if fields["experts_per_token"] > fields["num_experts"]:
        raise ValueError(
            f"field 'num_experts_per_tok' is {fields['experts_per_token']}, more than the "
            f"{fields['num_experts']} experts of field {experts_field!r}: each token chooses "
            "num_experts_per_tok of them."
        )
    if "norm_topk_prob" in values:
        fields["norm_topk_prob"] = flag(values, "norm_topk_prob")
    return fields


def expert_rows(
    cfg: HookedTransformerConfig, layer: int, moe: str, names: tuple[str, str, str]
) -> list[Row]:
    """The router ``{moe}gate.weight`` [num_experts, d_model] and each expert's gate, up and
    down projections ``{moe}experts.{e}.{name}.weight`` of layer ``layer``; with
    ``cfg.d_mlp_shared_expert``, the shared expert's (``{moe}shared_expert.{name}.weight``)
    and its gate ``{moe}shared_expert_gate.weight`` [1, d_model]."""
    m, mlp, ours = cfg.d_model, cfg.d_mlp, f"blocks.{layer}.mlp."
    gate, up, down = names
    rows = [Row(f"{moe}gate.weight", (cfg.num_experts, m), transposed(ours + "W_gate"))]
    for e in range(cfg.num_experts):
        hf, expert = f"{moe}experts.{e}.", f"{ours}experts.{e}."
        rows += [
            Row(f"{hf}{gate}.weight", (mlp, m), transposed(expert + "W_gate")),
            Row(f"{hf}{up}.weight", (mlp, m), transposed(expert + "W_in")),
            Row(f"{hf}{down}.weight", (m, mlp), transposed(expert + "W_out")),
        ]
    if cfg.d_mlp_shared_expert is not None:  # Qwen2-MoE's, with its sigmoid gate
        shared, hf, expert = (
            cfg.d_mlp_shared_expert,
            f"{moe}shared_expert.",
            ours + "shared_expert.",
        )
        rows += [
            Row(f"{hf}{gate}.weight", (shared, m), transposed(expert + "W_gate")),
            Row(f"{hf}{up}.weight", (shared, m), transposed(expert + "W_in")),
            Row(f"{hf}{down}.weight", (m, shared), transposed(expert + "W_out")),
            Row(
                f"{moe}shared_expert_gate.weight", (1, m), transposed(ours + "W_shared_expert_gate")
            ),
        ]
    return rows


def with_experts(
    cfg: HookedTransformerConfig, rows: list[Row], moe: str, names: tuple[str, str, str]
) -> list[Row]:
    """``rows`` (a Llama-layout table) with each layer's dense MLP rows (the checkpoint's
    ``mlp.*_proj``, our zero ``mlp.b_in``/``mlp.b_out``) replaced, where they stood, by its
    router and experts, whose checkpoint names start ``model.layers.{layer}.{moe}``."""
    replaced, done = [], set()
    for row in rows:
        # A zeros row is made from nothing: it is named by what it makes.
        name = row.checkpoint if row.checkpoint is not None else next(iter(row.convert(None)))
        dense = _DENSE_MLP.match(name)
        if dense is None:
            replaced.append(row)
        elif int(dense[1]) not in done:
            layer = int(dense[1])
            replaced += expert_rows(cfg, layer, f"model.layers.{layer}.{moe}", names)
            done.add(layer)
    return replaced


def config(values: dict[str, Any]) -> dict[str, Any]:
    return (
        mistral_config(values)
        | moe_config(values, "num_local_experts", "intermediate_size")
        | dict(expert_weights_in_float32=True)  # MixtralTopKRouter keeps them in float32
    )


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    return with_experts(cfg, llama_like_table(cfg), "block_sparse_moe.", MIXTRAL_EXPERT)


MIXTRAL = Family(
    name="Mixtral",
    architectures=("MixtralForCausalLM",),
    model_types=("mixtral",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
