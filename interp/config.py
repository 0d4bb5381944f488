"""HookedTransformerConfig: every number that fixes a model's shape and behaviour."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

ACTIVATION_FUNCTIONS = ("gelu_new", "gelu", "relu", "gelu_fast", "silu")
# "LNPre" is a layer norm whose weight and bias were folded into the next layer.
NORMALIZATION_TYPES = ("LN", "LNPre", None)


@dataclass
class HookedTransformerConfig:
    """The shape and options of a GPT-2-family transformer.

    Names follow TransformerLens 2.x so configs port unchanged. ``d_head`` defaults to
    ``d_model // n_heads`` and ``d_mlp`` to ``4 * d_model`` (``None`` for attention-only).

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=2, d_model=64, n_heads=4, d_vocab=100, n_ctx=32)
        >>> cfg.d_head, cfg.d_mlp
        (16, 256)
    """

    n_layers: int
    d_model: int
    n_ctx: int
    d_vocab: int
    n_heads: int
    d_head: int | None = None
    d_mlp: int | None = None
    act_fn: str = "gelu_new"
    attn_only: bool = False
    normalization_type: str | None = "LN"
    eps: float = 1e-5
    d_vocab_out: int | None = None
    # Opt-in hook points that cost memory or compute when present.
    use_attn_result: bool = False
    use_split_qkv_input: bool = False
    use_attn_in: bool = False
    use_hook_mlp_in: bool = False
    # Use torch's scaled_dot_product_attention when no score/pattern hook is active.
    use_fast_attention: bool = True
    init_range: float = 0.02
    seed: int | None = None
    model_name: str = "custom"
    tokenizer_name: str | None = None
    default_prepend_bos: bool = True
    original_architecture: str = "GPT2LMHeadModel"
    device: str | None = None
    dtype: torch.dtype = torch.float32
    # Free-form facts about where the weights came from (not used by the forward pass).
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.d_head is None:
            if self.d_model % self.n_heads != 0:
                raise ValueError(
                    f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                    "pass d_head explicitly."
                )
            self.d_head = self.d_model // self.n_heads
        if self.attn_only:
            self.d_mlp = None
        elif self.d_mlp is None:
            self.d_mlp = 4 * self.d_model
        if self.d_vocab_out is None:
            self.d_vocab_out = self.d_vocab
        if self.act_fn not in ACTIVATION_FUNCTIONS:
            raise ValueError(f"act_fn={self.act_fn!r} is not one of {ACTIVATION_FUNCTIONS}.")
        if self.normalization_type not in NORMALIZATION_TYPES:
            raise ValueError(
                f"normalization_type={self.normalization_type!r} is not one of "
                f"{NORMALIZATION_TYPES}."
            )
        if isinstance(self.dtype, str):
            self.dtype = getattr(torch, self.dtype.removeprefix("torch."))
        for name in ("n_layers", "d_model", "n_ctx", "d_vocab", "n_heads", "d_head"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (dtype as its name); ``from_dict`` inverts it."""
        out = dataclasses.asdict(self)
        out["dtype"] = str(self.dtype).removeprefix("torch.")
        out.pop("device")
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> HookedTransformerConfig:
        """Build a config from ``to_dict`` output, rejecting unknown keys by name."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown config keys {unknown}; valid keys are {sorted(known)}.")
        return cls(**values)


# The shapes of the GPT-2 family's published checkpoints (keys are their hub ids).
_PRESETS: dict[str, dict[str, Any]] = {
    "gpt2": dict(n_layers=12, d_model=768, n_heads=12),
    "gpt2-medium": dict(n_layers=24, d_model=1024, n_heads=16),
    "gpt2-large": dict(n_layers=36, d_model=1280, n_heads=20),
    "gpt2-xl": dict(n_layers=48, d_model=1600, n_heads=25),
    "distilgpt2": dict(n_layers=6, d_model=768, n_heads=12),
}


def preset_config(name: str, **overrides: Any) -> HookedTransformerConfig:
    """The config of a published GPT-2-family model by name, for random-weight models of
    the same shape (the weights themselves come from ``HookedTransformer.from_pretrained``).

    Example:
        >>> preset_config("gpt2-medium").d_model
        1024
    """
    if name not in _PRESETS:
        raise ValueError(f"No preset {name!r}; choose one of {sorted(_PRESETS)}.")
    values = dict(
        n_ctx=1024,
        d_vocab=50257,
        act_fn="gelu_new",
        model_name=name,
        tokenizer_name="gpt2",
        **_PRESETS[name],
    )
    return HookedTransformerConfig(**(values | overrides))
