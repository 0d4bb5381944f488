"""Hugging Face GPT-2 (``GPT2LMHeadModel``) weights in TransformerLens's layout."""

from __future__ import annotations

from typing import Any

import einops
import torch
from torch import Tensor

from interp.config import HookedTransformerConfig


def config_from_hf(hf_config: Any, **overrides: Any) -> HookedTransformerConfig:
    """The config of a Hugging Face ``GPT2Config`` (or its dict), refusing unsupported options."""
    values = hf_config if isinstance(hf_config, dict) else hf_config.to_dict()
    architectures = values.get("architectures") or ["GPT2LMHeadModel"]
    if values.get("model_type", "gpt2") != "gpt2":
        raise ValueError(
            f"This checkpoint is a {values.get('model_type')!r} model ({architectures}); "
            "interp loads GPT-2-family checkpoints (model_type 'gpt2') only."
        )
    if values.get("scale_attn_by_inverse_layer_idx"):
        raise ValueError("scale_attn_by_inverse_layer_idx=True is not supported.")
    if values.get("scale_attn_weights") is False:
        raise ValueError("scale_attn_weights=False is not supported.")
    d_model = values["n_embd"]
    cfg = dict(
        n_layers=values["n_layer"],
        d_model=d_model,
        n_heads=values["n_head"],
        d_mlp=values.get("n_inner") or 4 * d_model,
        n_ctx=values["n_positions"],
        d_vocab=values["vocab_size"],
        act_fn=values.get("activation_function", "gelu_new"),
        eps=values.get("layer_norm_epsilon", 1e-5),
        model_name=values.get("_name_or_path") or "gpt2",
        tokenizer_name="gpt2",
    )
    cfg.update(overrides)
    return HookedTransformerConfig(**cfg)


def convert_hf_state_dict(
    hf_state_dict: dict[str, Tensor], cfg: HookedTransformerConfig
) -> dict[str, Tensor]:
    """Rename and reshape a ``GPT2LMHeadModel`` state dict into our parameter names.

    Conv1D weights are stored [in, out]; the fused ``c_attn`` splits into per-head
    W_Q/W_K/W_V [n_heads, d_model, d_head]. A missing ``lm_head`` means tied embeddings.
    """
    sd = {k.removeprefix("transformer."): v for k, v in hf_state_dict.items()}
    n_heads, d_model = cfg.n_heads, cfg.d_model
    out = {
        "embed.W_E": sd["wte.weight"],
        "pos_embed.W_pos": sd["wpe.weight"],
        "ln_final.w": sd["ln_f.weight"],
        "ln_final.b": sd["ln_f.bias"],
        "unembed.W_U": sd.get("lm_head.weight", sd["wte.weight"]).T,
        "unembed.b_U": torch.zeros(cfg.d_vocab_out, dtype=sd["wte.weight"].dtype),
    }
    for layer in range(cfg.n_layers):
        hf, ours = f"h.{layer}.", f"blocks.{layer}."
        out[ours + "ln1.w"] = sd[hf + "ln_1.weight"]
        out[ours + "ln1.b"] = sd[hf + "ln_1.bias"]
        qkv_weight = sd[hf + "attn.c_attn.weight"].split(d_model, dim=1)  # 3 x [d_model, d_model]
        qkv_bias = sd[hf + "attn.c_attn.bias"].split(d_model)
        for name, weight, bias in zip("QKV", qkv_weight, qkv_bias, strict=True):
            out[ours + f"attn.W_{name}"] = einops.rearrange(weight, "m (h d) -> h m d", h=n_heads)
            out[ours + f"attn.b_{name}"] = einops.rearrange(bias, "(h d) -> h d", h=n_heads)
        out[ours + "attn.W_O"] = einops.rearrange(
            sd[hf + "attn.c_proj.weight"], "(h d) m -> h d m", h=n_heads
        )
        out[ours + "attn.b_O"] = sd[hf + "attn.c_proj.bias"]
        out[ours + "ln2.w"] = sd[hf + "ln_2.weight"]
        out[ours + "ln2.b"] = sd[hf + "ln_2.bias"]
        out[ours + "mlp.W_in"] = sd[hf + "mlp.c_fc.weight"]
        out[ours + "mlp.b_in"] = sd[hf + "mlp.c_fc.bias"]
        out[ours + "mlp.W_out"] = sd[hf + "mlp.c_proj.weight"]
        out[ours + "mlp.b_out"] = sd[hf + "mlp.c_proj.bias"]
    return out


def from_hf_model(hf_model: Any, tokenizer: Any = "gpt2") -> Any:
    """A HookedTransformer with the weights of an in-memory ``GPT2LMHeadModel``.

    Example:
        >>> model = from_hf_model(transformers.GPT2LMHeadModel(transformers.GPT2Config()))
    """
    from interp.model import HookedTransformer

    cfg = config_from_hf(hf_model.config, dtype=next(hf_model.parameters()).dtype)
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    model.load_state_dict(convert_hf_state_dict(hf_model.state_dict(), cfg))
    return model.to(next(hf_model.parameters()).device)
