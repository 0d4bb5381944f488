"""What a valid mixture-of-experts config is (``num_experts``, ``experts_per_token``,
``d_mlp_shared_expert``, gpt-oss's ``experts_swiglu_*``): each check raises a ``ValueError``
naming the fields and the fix; ``HookedTransformerConfig.__post_init__`` calls them after
``interp.config.checks``'s block checks.

Example:
    >>> from interp.config import HookedTransformerConfig
    >>> HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, d_head=4, d_mlp=16,
    ...     act_fn="silu", gated_mlp=True, num_experts=4, experts_per_token=8)
    Traceback (most recent call last):
    ValueError: experts_per_token=8 is more than num_experts=4: ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interp.config import HookedTransformerConfig


def check_experts(cfg: HookedTransformerConfig) -> None:
    """A mixture-of-experts MLP's fields: both counts or neither, at most ``num_experts``
    chosen per token, gated experts, and a shared expert only beside routed ones."""
    moe = cfg.num_experts is not None or cfg.experts_per_token is not None
    if moe and (cfg.num_experts is None or cfg.experts_per_token is None):
        raise ValueError(
            f"num_experts={cfg.num_experts} and experts_per_token={cfg.experts_per_token}: a "
            "mixture-of-experts MLP needs both (as TransformerLens); set both, or neither for "
            "a dense MLP."
        )
    for name in ("num_experts", "experts_per_token", "d_mlp_shared_expert"):
        value = getattr(cfg, name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value <= 0
        ):
            raise ValueError(f"{name} must be a positive integer or None, got {value!r}.")
    if not moe:
        if cfg.d_mlp_shared_expert is not None:
            raise ValueError(
                f"d_mlp_shared_expert={cfg.d_mlp_shared_expert} sizes the shared expert of a "
                "mixture-of-experts MLP, but num_experts=None has no experts; set num_experts "
                "and experts_per_token, or d_mlp_shared_expert=None."
            )
        return
    if cfg.experts_per_token > cfg.num_experts:
        raise ValueError(
            f"experts_per_token={cfg.experts_per_token} is more than num_experts="
            f"{cfg.num_experts}: each token chooses experts_per_token of the num_experts "
            "experts; lower experts_per_token or raise num_experts."
        )
    if cfg.attn_only:
        raise ValueError(
            f"num_experts={cfg.num_experts} makes the MLP a mixture of experts, but "
            "attn_only=True has no MLP; set num_experts=None or attn_only=False."
        )
    if not cfg.gated_mlp or cfg.act_fn in ("solu", "solu_ln", "xielu"):
        raise ValueError(
            f"num_experts={cfg.num_experts}: experts are gated MLPs (act(x @ W_gate) * "
            f"(x @ W_in)) with a plain activation, but gated_mlp={cfg.gated_mlp}, "
            f"act_fn={cfg.act_fn!r}; set gated_mlp=True and e.g. act_fn='silu'."
        )


def check_gpt_oss_experts(cfg: HookedTransformerConfig) -> None:
    """gpt-oss's experts (``experts_swiglu_limit``) need a mixture of experts and positive
    limit and alpha."""
    if cfg.experts_swiglu_limit is None:
        return
    if cfg.num_experts is None:
        raise ValueError(
            f"experts_swiglu_limit={cfg.experts_swiglu_limit} clamps gpt-oss's experts, but "
            "num_experts=None has none; set num_experts and experts_per_token, or "
            "experts_swiglu_limit=None."
        )
    for name in ("experts_swiglu_limit", "experts_swiglu_alpha"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}.")


def check_mxfp4_experts(cfg: HookedTransformerConfig) -> None:
    """``experts_mxfp4`` needs gpt-oss's experts and sizes that are whole MXFP4 blocks."""
    if not cfg.experts_mxfp4:
        return
    if cfg.experts_swiglu_limit is None:
        raise ValueError(
            "experts_mxfp4=True keeps gpt-oss's experts in MXFP4, but experts_swiglu_limit=None "
            "is not gpt-oss's mixture of experts; set experts_swiglu_limit (7.0 for gpt-oss), "
            "or experts_mxfp4=False."
        )
    if cfg.d_model % 32 or cfg.d_mlp % 32:
        raise ValueError(
            f"experts_mxfp4=True needs d_model ({cfg.d_model}) and d_mlp ({cfg.d_mlp}) to be "
            "multiples of 32 (one MXFP4 scale a block of 32 values); set experts_mxfp4=False."
        )
