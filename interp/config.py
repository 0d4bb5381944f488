"""HookedTransformerConfig: every number that fixes a model's shape and behaviour."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

ACTIVATION_FUNCTIONS = ("gelu_new", "gelu", "relu", "gelu_fast", "silu")
# "LNPre" is a layer norm whose weight and bias were folded into the next layer.
NORMALIZATION_TYPES = ("LN", "LNPre", None)

# TransformerLens fields for features interp's model does not have yet, with the values under
# which TransformerLens computes exactly what interp computes. Any other value is an error
# naming the field: a config is never half-honoured. (Fields that only tune a feature that is
# off, such as rotary_base without rotary embeddings, are inert in TransformerLens too.)
_ONLY_SUPPORTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "positional_embedding_type": (("standard",), "rotary, shortformer or alibi embeddings"),
    "attention_dir": (("causal",), "bidirectional attention"),
    "use_local_attn": ((False,), "local attention"),
    "init_mode": (("gpt2",), "initialisation other than GPT-2's"),
    "n_devices": ((1,), "multi-device splitting"),
    "scale_attn_by_inverse_layer_idx": ((False,), "attention scaled by 1/layer"),
    "use_attn_scale": ((True,), "unscaled attention"),
    "final_rms": ((False,), "RMS norms"),
    "parallel_attn_mlp": ((False,), "parallel attention and MLP blocks"),
    "use_hook_tokens": ((False,), "a hook point on the input tokens"),
    "gated_mlp": ((False,), "gated MLPs"),
    "post_embedding_ln": ((False,), "a layer norm after the embedding"),
    "load_in_4bit": ((False,), "4-bit weights"),
    "num_experts": ((None,), "mixture-of-experts MLPs"),
    "experts_per_token": ((None,), "mixture-of-experts MLPs"),
    "relative_attention_max_distance": ((None,), "relative attention (T5)"),
    "relative_attention_num_buckets": ((None,), "relative attention (T5)"),
    "decoder_start_token_id": ((None,), "encoder-decoder models"),
    "tie_word_embeddings": ((False,), "W_U tied to W_E (a tied checkpoint loads as a copy)"),
    "use_normalization_before_and_after": ((False,), "sandwich norms"),
    "attn_scores_soft_cap": ((-1.0, 0.0), "soft-capped attention scores"),
    "output_logits_soft_cap": ((-1.0, 0.0), "soft-capped logits"),
    "use_NTK_by_parts_rope": ((False,), "NTK-by-parts rotary embeddings"),
    "use_qk_norm": ((False,), "query and key norms"),
}
_GPT2_SMALL = dict(n_layers=12, d_model=768, n_ctx=1024, d_head=64, n_heads=12, d_mlp=3072)
_POSITIVE_INTS = ("n_layers", "d_model", "n_ctx", "d_head", "n_heads")
_BOOLS = tuple(
    name for name, (allowed, _) in _ONLY_SUPPORTED.items() if type(allowed[0]) is bool
) + (
    "attn_only",
    "use_attn_result",
    "use_split_qkv_input",
    "use_attn_in",
    "use_hook_mlp_in",
    "use_fast_attention",
    "default_prepend_bos",
    "init_weights",
    "ungroup_grouped_query_attention",
    "from_checkpoint",
    "trust_remote_code",
    "rotary_adjacent_pairs",
)


@dataclass
class HookedTransformerConfig:
    """The shape and options of a GPT-2-family transformer.

    Field names, order and defaults follow TransformerLens 2.x, so its configs port unchanged:
    give ``n_heads`` or ``d_head`` (the other is derived from ``d_model``); ``d_vocab=-1``
    takes the vocabulary size from the tokenizer the model is built with; ``d_mlp`` defaults
    to ``4 * d_model`` (``None`` for attention-only models). A TransformerLens field for a
    feature interp does not have yet (rotary embeddings, GQA, ...) is accepted at the value
    that switches it off; any other value is a ``ValueError`` naming the field.

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=2, d_model=64, n_ctx=32, d_head=16, d_vocab=100)
        >>> cfg.n_heads, cfg.d_mlp
        (4, 256)
    """

    n_layers: int
    d_model: int
    n_ctx: int
    d_head: int | None = None
    model_name: str = "custom"
    n_heads: int = -1
    d_mlp: int | None = None
    act_fn: str | None = "gelu_new"
    d_vocab: int = -1
    eps: float = 1e-5
    # Opt-in hook points that cost memory or compute when present.
    use_attn_result: bool = False
    use_attn_scale: bool = True
    attn_scale: float = -1.0  # sqrt(d_head) once resolved, as in TransformerLens
    use_split_qkv_input: bool = False
    use_hook_mlp_in: bool = False
    use_attn_in: bool = False
    use_local_attn: bool = False
    ungroup_grouped_query_attention: bool = False
    original_architecture: str | None = "GPT2LMHeadModel"  # a label of the weights' origin
    from_checkpoint: bool = False
    checkpoint_index: int | None = None
    checkpoint_label_type: str | None = None
    checkpoint_value: int | None = None
    tokenizer_name: str | None = None
    window_size: int | None = None
    attn_types: list[str] | None = None
    init_mode: str = "gpt2"
    normalization_type: str | None = "LN"
    device: str | None = None
    n_devices: int = 1
    attention_dir: str = "causal"
    attn_only: bool = False
    seed: int | None = None
    initializer_range: float = -1.0  # TransformerLens's name for init_range
    init_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    positional_embedding_type: str = "standard"
    final_rms: bool = False
    d_vocab_out: int = -1
    parallel_attn_mlp: bool = False
    rotary_dim: int | None = None
    n_params: int | None = None  # computed, as in TransformerLens
    use_hook_tokens: bool = False
    gated_mlp: bool = False
    default_prepend_bos: bool = True
    dtype: torch.dtype = torch.float32
    tokenizer_prepends_bos: bool | None = None
    n_key_value_heads: int | None = None
    post_embedding_ln: bool = False
    rotary_base: int = 10000
    trust_remote_code: bool = False
    rotary_adjacent_pairs: bool = False
    load_in_4bit: bool = False
    num_experts: int | None = None
    experts_per_token: int | None = None
    relative_attention_max_distance: int | None = None
    relative_attention_num_buckets: int | None = None
    decoder_start_token_id: int | None = None
    tie_word_embeddings: bool = False
    use_normalization_before_and_after: bool = False
    attn_scores_soft_cap: float = -1.0
    output_logits_soft_cap: float = -1.0
    use_NTK_by_parts_rope: bool = False
    NTK_by_parts_low_freq_factor: float = 1.0
    NTK_by_parts_high_freq_factor: float = 4.0
    NTK_by_parts_factor: float = 8.0
    NTK_original_ctx_len: int = 8192
    use_qk_norm: bool = False
    # interp's own: torch's scaled_dot_product_attention when no score/pattern hook is active.
    use_fast_attention: bool = True
    init_range: float = 0.02  # weights ~ N(0, init_range) at initialisation
    # Free-form facts about where the weights came from (not used by the forward pass).
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_types()
        self._resolve_heads()
        if self.attn_only:
            self.d_mlp = None
        elif self.d_mlp is None:
            self.d_mlp = 4 * self.d_model
        if self.d_vocab_out in (-1, None):
            self.d_vocab_out = self.d_vocab
        if not self.attn_only and self.act_fn not in ACTIVATION_FUNCTIONS:
            raise ValueError(f"act_fn={self.act_fn!r} is not one of {ACTIVATION_FUNCTIONS}.")
        if self.normalization_type not in NORMALIZATION_TYPES:
            raise ValueError(
                f"normalization_type={self.normalization_type!r} is not supported; use one of "
                f"{NORMALIZATION_TYPES}."
            )
        self.dtype = _parse_dtype(self.dtype)
        self._check_supported()
        self._resolve_init_range()
        if self.attn_scale == -1.0:
            self.attn_scale = math.sqrt(self.d_head)
        self.n_params = self.n_layers * self.d_model * self.d_head * self.n_heads * 4
        if not self.attn_only:
            self.n_params += self.n_layers * self.d_model * self.d_mlp * 2
        if self.device is not None:
            from interp.devices import check_device

            check_device(self.device)

    def _check_types(self) -> None:
        """Name the field of a wrong type (a string for an int, a null, ...) and say the fix."""
        for name in _POSITIVE_INTS + ("d_mlp", "d_vocab", "d_vocab_out", "n_key_value_heads"):
            value = getattr(self, name)
            optional = name not in ("n_layers", "d_model", "n_ctx")
            if value is None and optional:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                need = "a positive integer" if optional else "given, as a positive integer"
                raise ValueError(
                    f"{name} must be {need}, got {value!r} ({type(value).__name__}); "
                    f"e.g. {name}={_GPT2_SMALL.get(name, 64)} as in GPT-2 small."
                )
        for name in _BOOLS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(
                    f"{name} must be True or False, got {value!r} ({type(value).__name__})."
                )
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) or self.eps <= 0:
            raise ValueError(f"eps must be a positive number, got {self.eps!r}; e.g. eps=1e-5.")

    def _resolve_heads(self) -> None:
        """n_heads from d_model // d_head when omitted (-1), d_head from d_model // n_heads."""
        if self.n_heads == -1:
            if self.d_head is None:
                raise ValueError("Give n_heads or d_head (the other is derived from d_model).")
            self._check_positive("d_head")
            self.n_heads = self.d_model // self.d_head
            if self.d_model % self.d_head:
                warnings.warn(
                    f"d_model={self.d_model} is not divisible by d_head={self.d_head}; n_heads "
                    f"is rounded down to {self.n_heads} (as TransformerLens does).",
                    stacklevel=4,
                )
        self._check_positive("n_heads")
        if self.d_head is None:
            if self.d_model % self.n_heads != 0:
                raise ValueError(
                    f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                    "pass d_head explicitly."
                )
            self.d_head = self.d_model // self.n_heads
        for name in _POSITIVE_INTS:
            self._check_positive(name)
        if self.d_mlp is not None:
            self._check_positive("d_mlp")
        for name in ("d_vocab", "d_vocab_out"):
            value = getattr(self, name)
            if value is not None and value <= 0 and value != -1:
                raise ValueError(
                    f"{name} must be positive, or -1 to take it from the tokenizer; got {value}."
                )

    def _check_positive(self, name: str) -> None:
        if getattr(self, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")

    def _check_supported(self) -> None:
        for name, (allowed, feature) in _ONLY_SUPPORTED.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(
                    f"{name}={value!r} is not supported yet (interp's model has no {feature}); "
                    f"leave {name} at {allowed[0]!r}."
                )
        if self.n_key_value_heads not in (None, self.n_heads):
            raise ValueError(
                f"n_key_value_heads={self.n_key_value_heads} is not supported yet (interp's model "
                f"has no grouped-query attention); leave it None or equal to n_heads="
                f"{self.n_heads}."
            )
        if self.attn_scale != -1.0 and not math.isclose(self.attn_scale, math.sqrt(self.d_head)):
            raise ValueError(
                f"attn_scale={self.attn_scale} is not supported yet: interp divides attention "
                f"scores by sqrt(d_head)={math.sqrt(self.d_head):g}; leave attn_scale at -1."
            )

    def _resolve_init_range(self) -> None:
        """``initializer_range`` (TransformerLens) and ``init_range`` (interp) are one number."""
        if self.initializer_range == -1.0:
            self.initializer_range = self.init_range
        elif self.init_range not in (0.02, self.initializer_range):
            raise ValueError(
                f"initializer_range={self.initializer_range} and init_range={self.init_range} "
                "disagree; they are the same setting, give only one."
            )
        self.init_range = self.initializer_range

    def set_d_vocab_from_tokenizer(self, tokenizer: Any) -> None:
        """Resolve ``d_vocab=-1`` (and ``d_vocab_out=-1``) to the tokenizer's vocabulary size,
        as TransformerLens does when a model is built with a tokenizer.

        Example:
            >>> cfg.set_d_vocab_from_tokenizer(interp.get_tokenizer("gpt2")); cfg.d_vocab
            50257
        """
        if self.d_vocab != -1:
            return
        if tokenizer is None:
            raise ValueError(
                "d_vocab=-1 means 'take the vocabulary size from the tokenizer', but the model "
                "has no tokenizer: pass tokenizer=... (or set cfg.tokenizer_name), or set d_vocab."
            )
        self.d_vocab = len(tokenizer)
        if self.d_vocab_out == -1:
            self.d_vocab_out = self.d_vocab

    def to_dict(self) -> dict[str, Any]:
        """Every field by name (a new dict; ``dtype`` stays a ``torch.dtype``), as
        TransformerLens's ``to_dict``; ``HookedTransformerConfig(**cfg.to_dict())`` is ``cfg``.

        Example:
            >>> cfg.to_dict()["n_heads"]
            4
        """
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> HookedTransformerConfig:
        """Build a config from ``to_dict`` output or a saved ``config.json`` (``dtype`` as a
        name), naming unknown and missing keys.

        Example:
            >>> HookedTransformerConfig.from_dict({"n_layers": 1, "d_model": 8, "n_ctx": 4,
            ...                                    "n_heads": 2, "dtype": "bfloat16"})
        """
        if not isinstance(values, dict):
            raise TypeError(f"A config is a dict or a HookedTransformerConfig, got {values!r}.")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown config keys {unknown}; valid keys are {sorted(known)}.")
        missing = [name for name in ("n_layers", "d_model", "n_ctx") if name not in values]
        if missing:
            raise ValueError(f"The config has no {missing}; these fields are required.")
        return cls(**values)

    @classmethod
    def unwrap(cls, config: HookedTransformerConfig | dict[str, Any]) -> HookedTransformerConfig:
        """A config from a config or its dict, as TransformerLens's ``unwrap``.

        Example:
            >>> values = {"n_layers": 1, "d_model": 8, "n_ctx": 4, "d_head": 4}
            >>> cfg = HookedTransformerConfig.unwrap(values)
            >>> cfg.n_heads
            2
        """
        return config if isinstance(config, cls) else cls.from_dict(config)


def _parse_dtype(dtype: Any) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    resolved = (
        getattr(torch, dtype.removeprefix("torch."), None) if isinstance(dtype, str) else None
    )
    if not isinstance(resolved, torch.dtype):
        raise ValueError(
            f"dtype={dtype!r} is not a torch dtype; use e.g. 'float32', 'bfloat16' or 'float16'."
        )
    return resolved


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
