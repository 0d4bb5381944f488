"""What a valid HookedTransformerConfig is: the allowed values of its fields, the
TransformerLens fields interp accepts only switched off, and the fields that contradict
each other. Each check raises a ``ValueError`` naming the field and the fix; a few also
resolve a default that depends on other fields (``n_heads``/``d_head``, ``attn_scale``,
``rotary_dim``, ``init_range``), in the order ``HookedTransformerConfig.__post_init__``
calls them.

Example:
    >>> from interp.config import HookedTransformerConfig
    >>> HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, n_heads=3)
    Traceback (most recent call last):
    ValueError: d_model=8 is not divisible by n_heads=3; pass d_head explicitly.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interp.config import HookedTransformerConfig

# "solu" is x * softmax(x); "solu_ln" adds a layer norm after it (the MLP's ``ln``);
# "xielu" has trainable parameters (the MLP's ``act_fn.alpha_p``/``alpha_n``).
ACTIVATION_FUNCTIONS = (
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu",
    "relu",
    "gelu_fast",
    "silu",
    "solu",
    "solu_ln",
    "xielu",
)
# "LNPre"/"RMSPre" are norms whose weights (and bias) were folded into the next layer.
NORMALIZATION_TYPES = ("LN", "LNPre", "RMS", "RMSPre", None)
# "shortformer": learned positions added to the query and key inputs only, not the residual.
# "alibi": no position embeddings; each head adds slope * key position to its scores (BLOOM).
POSITIONAL_EMBEDDING_TYPES = ("standard", "rotary", "shortformer", "alibi")
ATTENTION_TYPES = ("global", "local")
# "bidirectional": every position attends to every key (no causal mask), as an encoder.
ATTENTION_DIRECTIONS = ("causal", "bidirectional")

# TransformerLens fields for features interp's model does not have yet, with the values under
# which TransformerLens computes exactly what interp computes. Any other value is an error
# naming the field: a config is never half-honoured. (Fields that only tune a feature that is
# off, such as rotary_base without rotary embeddings, are inert in TransformerLens too.)
_ONLY_SUPPORTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "init_mode": (("gpt2",), "initialisation other than GPT-2's"),
    "scale_attn_by_inverse_layer_idx": ((False,), "attention scaled by 1/layer"),
    "final_rms": ((False,), "RMS final norm after layer-norm blocks"),
    "load_in_4bit": ((False,), "4-bit weights"),
    "relative_attention_max_distance": ((None,), "relative attention (T5)"),
    "relative_attention_num_buckets": ((None,), "relative attention (T5)"),
    "decoder_start_token_id": ((None,), "encoder-decoder models"),
}
# Example values for the type errors, and the fields each type check covers.
_GPT2_SMALL = dict(n_layers=12, d_model=768, n_ctx=1024, d_head=64, n_heads=12, d_mlp=3072)
_POSITIVE_INTS = ("n_layers", "d_model", "n_ctx", "d_head", "n_heads")
_BOOLS = tuple(
    name for name, (allowed, _) in _ONLY_SUPPORTED.items() if type(allowed[0]) is bool
) + (
    "attn_only",
    "use_hook_tokens",
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
    "use_local_attn",
    "use_attn_scale",
    "parallel_attn_mlp",
    "gated_mlp",
    "tie_word_embeddings",
    "use_normalization_before_and_after",
    "use_NTK_by_parts_rope",
    "use_qk_norm",
    "rmsnorm_uses_offset",
    "attn_scores_float32",
    "use_post_norms_only",
    "qk_norm_across_heads",
    "rmsnorm_weight_in_float32",
    "rotary_in_float32",
    "post_embedding_ln",
    "use_yarn_rope",
    "yarn_truncate",
    "use_attn_sinks",
    "norm_topk_prob",
    "expert_weights_in_float32",
    "experts_mxfp4",
)


def check_choices(cfg: HookedTransformerConfig) -> None:
    """``act_fn``, ``normalization_type``, ``positional_embedding_type`` and
    ``attention_dir`` are among the values interp implements."""
    if not cfg.attn_only and cfg.act_fn not in ACTIVATION_FUNCTIONS:
        raise ValueError(f"act_fn={cfg.act_fn!r} is not one of {ACTIVATION_FUNCTIONS}.")
    if cfg.attention_dir not in ATTENTION_DIRECTIONS:
        raise ValueError(
            f"attention_dir={cfg.attention_dir!r} is not one of {ATTENTION_DIRECTIONS}."
        )
    if cfg.normalization_type not in NORMALIZATION_TYPES:
        raise ValueError(
            f"normalization_type={cfg.normalization_type!r} is not supported; use one of "
            f"{NORMALIZATION_TYPES}."
        )
    if cfg.positional_embedding_type not in POSITIONAL_EMBEDDING_TYPES:
        raise ValueError(
            f"positional_embedding_type={cfg.positional_embedding_type!r} is not supported; "
            f"use one of "
            f"{POSITIONAL_EMBEDDING_TYPES}."
        )


def check_types(cfg: HookedTransformerConfig) -> None:
    """Name the field of a wrong type (a string for an int, a null, ...) and say the fix."""
    for name in _POSITIVE_INTS + ("d_mlp", "d_vocab", "d_vocab_out", "n_key_value_heads"):
        value = getattr(cfg, name)
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
        value = getattr(cfg, name)
        if not isinstance(value, bool):
            raise ValueError(
                f"{name} must be True or False, got {value!r} ({type(value).__name__})."
            )
    if isinstance(cfg.eps, bool) or not isinstance(cfg.eps, (int, float)) or cfg.eps <= 0:
        raise ValueError(f"eps must be a positive number, got {cfg.eps!r}; e.g. eps=1e-5.")


def resolve_heads(cfg: HookedTransformerConfig) -> None:
    """n_heads from d_model // d_head when omitted (-1), d_head from d_model // n_heads."""
    if cfg.n_heads == -1:
        if cfg.d_head is None:
            raise ValueError("Give n_heads or d_head (the other is derived from d_model).")
        _check_positive(cfg, "d_head")
        cfg.n_heads = cfg.d_model // cfg.d_head
        if cfg.d_model % cfg.d_head:
            warnings.warn(
                f"d_model={cfg.d_model} is not divisible by d_head={cfg.d_head}; n_heads "
                f"is rounded down to {cfg.n_heads} (as TransformerLens does).",
                stacklevel=4,
            )
    _check_positive(cfg, "n_heads")
    if cfg.d_head is None:
        if cfg.d_model % cfg.n_heads != 0:
            raise ValueError(
                f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}; "
                "pass d_head explicitly."
            )
        cfg.d_head = cfg.d_model // cfg.n_heads
    for name in _POSITIVE_INTS:
        _check_positive(cfg, name)
    _check_positive(cfg, "n_devices")  # blocks split over that many devices (one process)
    if cfg.d_mlp is not None:
        _check_positive(cfg, "d_mlp")
    for name in ("d_vocab", "d_vocab_out"):
        value = getattr(cfg, name)
        if value is not None and value <= 0 and value != -1:
            raise ValueError(
                f"{name} must be positive, or -1 to take it from the tokenizer; got {value}."
            )


def _check_positive(cfg: HookedTransformerConfig, name: str) -> None:
    if getattr(cfg, name) <= 0:
        raise ValueError(f"{name} must be positive, got {getattr(cfg, name)}.")


def check_supported(cfg: HookedTransformerConfig) -> None:
    for name, (allowed, feature) in _ONLY_SUPPORTED.items():
        value = getattr(cfg, name)
        if name == "final_rms" and cfg.normalization_type in ("RMS", "RMSPre"):
            continue  # TL's configs set it on RMS models, whose final norm is RMS already
        if value not in allowed:
            raise ValueError(
                f"{name}={value!r} is not supported yet (interp's model has no {feature}); "
                f"leave {name} at {allowed[0]!r}."
            )


def check_blocks(cfg: HookedTransformerConfig) -> None:
    """Norms, MLP and block layout that contradict each other."""
    if cfg.parallel_attn_mlp and cfg.attn_only:
        raise ValueError(
            "parallel_attn_mlp=True runs the MLP beside the attention, but attn_only=True "
            "has no MLP; set parallel_attn_mlp=False or attn_only=False."
        )
    if cfg.use_normalization_before_and_after and cfg.normalization_type is None:
        raise ValueError(
            "use_normalization_before_and_after=True adds norms after attention and the "
            "MLP, but normalization_type=None has no norm; set normalization_type (e.g. "
            "'RMS') or use_normalization_before_and_after=False."
        )
    if cfg.use_post_norms_only and (
        cfg.use_normalization_before_and_after or cfg.normalization_type is None
    ):
        raise ValueError(
            "use_post_norms_only=True keeps only the norms after attention and the MLP; it "
            "needs a normalization_type and excludes use_normalization_before_and_after "
            f"(got normalization_type={cfg.normalization_type!r}, "
            f"use_normalization_before_and_after={cfg.use_normalization_before_and_after})."
        )
    if cfg.qk_norm_across_heads and not cfg.use_qk_norm:
        raise ValueError(
            "qk_norm_across_heads=True says how the QK norms normalise, but use_qk_norm=False "
            "has none; set use_qk_norm=True or qk_norm_across_heads=False."
        )
    if cfg.rmsnorm_uses_offset and cfg.normalization_type in ("LN", "LNPre"):
        raise ValueError(
            "rmsnorm_uses_offset=True makes RMS norms scale by 1 + w, but "
            f"normalization_type={cfg.normalization_type!r} is a layer norm; set "
            "normalization_type='RMS' or rmsnorm_uses_offset=False."
        )
    if cfg.gated_mlp and not cfg.attn_only and cfg.act_fn == "solu_ln":
        raise ValueError(
            "act_fn='solu_ln' puts a layer norm after the activation, which a gated MLP "
            "(gated_mlp=True) has no place for; use act_fn='solu' or gated_mlp=False."
        )
    if cfg.tie_word_embeddings and cfg.d_vocab_out != cfg.d_vocab:
        raise ValueError(
            f"tie_word_embeddings=True makes W_U a copy of W_E.T, but d_vocab_out="
            f"{cfg.d_vocab_out} != d_vocab={cfg.d_vocab}; set d_vocab_out=-1 or "
            "tie_word_embeddings=False."
        )
    for name in ("attn_scores_soft_cap", "output_logits_soft_cap"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name} must be a number, got {value!r}; -1.0 turns it off.")
        if value < 0 and value != -1.0:
            raise ValueError(
                f"{name}={value} is negative; give a positive cap, or -1.0 to turn it off."
            )


def check_attention(cfg: HookedTransformerConfig) -> None:
    """Grouped-query heads, the score divisor and sliding windows."""
    if cfg.n_key_value_heads is not None:
        _check_positive(cfg, "n_key_value_heads")
        if cfg.n_heads % cfg.n_key_value_heads:
            divisors = [k for k in range(1, cfg.n_heads + 1) if cfg.n_heads % k == 0]
            raise ValueError(
                f"n_heads={cfg.n_heads} is not divisible by n_key_value_heads="
                f"{cfg.n_key_value_heads}: each key/value head serves the same number of "
                f"query heads; use n_key_value_heads in {divisors}."
            )
        if cfg.ungroup_grouped_query_attention and cfg.n_key_value_heads != cfg.n_heads:
            raise ValueError(
                "ungroup_grouped_query_attention=True is not supported yet (interp keeps "
                "n_key_value_heads keys and values and expands them for scoring only); "
                "leave ungroup_grouped_query_attention at False."
            )
    if isinstance(cfg.attn_scale, bool) or not isinstance(cfg.attn_scale, (int, float)):
        raise ValueError(f"attn_scale must be a number, got {cfg.attn_scale!r}.")
    if not cfg.use_attn_scale:
        if cfg.attn_scale not in (-1.0, 1.0):
            raise ValueError(
                f"use_attn_scale=False divides the scores by 1, but attn_scale="
                f"{cfg.attn_scale}; leave attn_scale at -1 or set use_attn_scale=True."
            )
        cfg.attn_scale = 1.0
    elif cfg.attn_scale == -1.0:
        cfg.attn_scale = math.sqrt(cfg.d_head)
    elif cfg.attn_scale <= 0:
        raise ValueError(
            f"attn_scale={cfg.attn_scale} must be positive (the scores are divided by "
            f"it); leave it at -1 for sqrt(d_head)={math.sqrt(cfg.d_head):g}."
        )
    _check_local_attention(cfg)
    if cfg.attention_dir == "bidirectional" and cfg.use_local_attn:
        raise ValueError(
            "use_local_attn=True limits each query to the keys before it, but "
            "attention_dir='bidirectional' has no causal mask; set use_local_attn=False or "
            "attention_dir='causal'."
        )


def _check_local_attention(cfg: HookedTransformerConfig) -> None:
    """``use_local_attn``, ``window_size`` and ``attn_types`` as TransformerLens: local
    layers are the "local" entries of ``attn_types``, with a window of ``window_size``."""
    if cfg.attn_types is not None:
        if not isinstance(cfg.attn_types, (list, tuple)) or len(cfg.attn_types) != cfg.n_layers:
            raise ValueError(
                f"attn_types must list one of {ATTENTION_TYPES} for each of the n_layers="
                f"{cfg.n_layers} layers, got {cfg.attn_types!r}."
            )
        unknown = sorted({str(t) for t in cfg.attn_types if t not in ATTENTION_TYPES})
        if unknown:
            raise ValueError(
                f"attn_types has unknown entries {unknown}; each layer is one of {ATTENTION_TYPES}."
            )
        cfg.attn_types = list(cfg.attn_types)
    has_local = cfg.attn_types is not None and "local" in cfg.attn_types
    if cfg.window_size is not None:
        if isinstance(cfg.window_size, bool) or not isinstance(cfg.window_size, int):
            raise ValueError(f"window_size must be a positive integer, got {cfg.window_size!r}.")
        _check_positive(cfg, "window_size")
    if not cfg.use_local_attn:
        if cfg.window_size is not None or has_local:
            raise ValueError(
                f"window_size={cfg.window_size!r} and attn_types={cfg.attn_types!r} take "
                "effect only with use_local_attn=True (as in TransformerLens); set "
                "use_local_attn=True, or window_size=None and no 'local' attn_types."
            )
        return
    if cfg.window_size is None or cfg.attn_types is None:
        raise ValueError(
            "use_local_attn=True needs window_size (how many positions a local layer "
            "sees) and attn_types (one 'global' or 'local' a layer); got window_size="
            f"{cfg.window_size!r}, attn_types={cfg.attn_types!r}."
        )
    if not has_local:
        raise ValueError(
            f"window_size={cfg.window_size} applies to 'local' layers, but attn_types has "
            "none; mark the windowed layers 'local' in attn_types, or set "
            "use_local_attn=False and window_size=None."
        )


def check_rotary(cfg: HookedTransformerConfig) -> None:
    """Rotary fields: ``rotary_dim`` defaults to ``d_head``; one rope scaling at most."""
    for name in ("rotary_base", "rotary_base_local", "rotary_scaling_factor"):
        value = getattr(cfg, name)
        if value is None and name == "rotary_base_local":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}.")
    if cfg.positional_embedding_type != "rotary":
        return  # the rotary fields are inert, as in TransformerLens
    if cfg.rotary_dim is None:
        cfg.rotary_dim = cfg.d_head
    if (
        isinstance(cfg.rotary_dim, bool)
        or not isinstance(cfg.rotary_dim, int)
        or cfg.rotary_dim <= 0
        or cfg.rotary_dim % 2
        or cfg.rotary_dim > cfg.d_head
    ):
        raise ValueError(
            f"rotary_dim={cfg.rotary_dim!r} must be a positive even number at most d_head="
            f"{cfg.d_head} (rotary turns pairs of dimensions); e.g. rotary_dim="
            f"{cfg.d_head} (all of each head) or {max(2, cfg.d_head // 4 // 2 * 2)} "
            "(a quarter, as Pythia)."
        )
    _check_longrope(cfg)
    _check_yarn(cfg)
    if cfg.use_NTK_by_parts_rope:
        if cfg.rotary_scaling_factor != 1.0:
            raise ValueError(
                "use_NTK_by_parts_rope=True and rotary_scaling_factor="
                f"{cfg.rotary_scaling_factor} are two rope scalings; use one (set "
                "rotary_scaling_factor=1.0 or use_NTK_by_parts_rope=False)."
            )
        for name in (
            "NTK_by_parts_factor",
            "NTK_by_parts_low_freq_factor",
            "NTK_by_parts_high_freq_factor",
            "NTK_original_ctx_len",
        ):
            value = getattr(cfg, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}.")
        if cfg.NTK_by_parts_high_freq_factor <= cfg.NTK_by_parts_low_freq_factor:
            raise ValueError(
                f"NTK_by_parts_high_freq_factor={cfg.NTK_by_parts_high_freq_factor} must "
                f"exceed NTK_by_parts_low_freq_factor={cfg.NTK_by_parts_low_freq_factor} "
                "(Llama 3 uses 4.0 and 1.0)."
            )


def _check_yarn(cfg: HookedTransformerConfig) -> None:
    """YaRN (``use_yarn_rope``): its factor, band and original context; the attention factor
    defaults to ``0.1 * ln(factor) + 1`` (1 for a factor of at most 1), as Hugging Face."""
    if not cfg.use_yarn_rope:
        return
    for name in ("yarn_factor", "yarn_beta_fast", "yarn_beta_slow", "yarn_original_ctx_len"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(
                f"use_yarn_rope=True needs {name} as a positive number, got {value!r}."
            )
    if cfg.use_NTK_by_parts_rope or cfg.rotary_scaling_factor != 1.0 or cfg.longrope_short_factor:
        raise ValueError(
            "use_yarn_rope=True and another rope scaling (use_NTK_by_parts_rope, "
            "rotary_scaling_factor or LongRoPE) are two rope scalings; use one."
        )
    if cfg.yarn_attention_factor is None:
        factor = cfg.yarn_factor
        cfg.yarn_attention_factor = 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0
    elif not cfg.yarn_attention_factor > 0:
        raise ValueError(
            f"yarn_attention_factor must be a positive number, got {cfg.yarn_attention_factor!r}."
        )


def _check_longrope(cfg: HookedTransformerConfig) -> None:
    """LongRoPE's fields: both factor lists (one positive number per rotary frequency, so
    ``rotary_dim / 2``), the original context and a positive attention factor, and no other
    rope scaling; all unset when it is off."""
    names = ("longrope_short_factor", "longrope_long_factor", "longrope_original_ctx_len")
    given = [name for name in names if getattr(cfg, name) is not None]
    if not given:
        if cfg.longrope_attention_factor != 1.0:
            raise ValueError(
                f"longrope_attention_factor={cfg.longrope_attention_factor} takes effect only "
                "with LongRoPE (longrope_short_factor, longrope_long_factor, "
                "longrope_original_ctx_len); set them, or leave it at 1.0."
            )
        return
    if len(given) != len(names):
        missing = [name for name in names if name not in given]
        raise ValueError(f"LongRoPE needs {', '.join(names)}; {', '.join(missing)} not given.")
    for name in names[:2]:
        factors = getattr(cfg, name)
        if (
            not isinstance(factors, (list, tuple))
            or len(factors) != cfg.rotary_dim // 2
            or not all(
                isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f < math.inf
                for f in factors
            )
        ):
            raise ValueError(
                f"{name} must list {cfg.rotary_dim // 2} positive numbers (one per rotary "
                f"frequency: rotary_dim / 2), got {factors!r}."
            )
    original, attention = cfg.longrope_original_ctx_len, cfg.longrope_attention_factor
    if isinstance(original, bool) or not isinstance(original, int) or original <= 0:
        raise ValueError(f"longrope_original_ctx_len must be a positive integer, got {original!r}.")
    if isinstance(attention, bool) or not isinstance(attention, (int, float)) or attention <= 0:
        raise ValueError(f"longrope_attention_factor must be a positive number, got {attention!r}.")
    if cfg.use_NTK_by_parts_rope or cfg.rotary_scaling_factor != 1.0:
        raise ValueError(
            "LongRoPE (longrope_*) and use_NTK_by_parts_rope / rotary_scaling_factor are two "
            "rope scalings; use one."
        )
    cfg.longrope_short_factor = [float(f) for f in cfg.longrope_short_factor]
    cfg.longrope_long_factor = [float(f) for f in cfg.longrope_long_factor]


def resolve_init_range(cfg: HookedTransformerConfig) -> None:
    """``initializer_range`` (TransformerLens) and ``init_range`` (interp) are one number."""
    if cfg.initializer_range == -1.0:
        cfg.initializer_range = cfg.init_range
    elif cfg.init_range not in (0.02, cfg.initializer_range):
        raise ValueError(
            f"initializer_range={cfg.initializer_range} and init_range={cfg.init_range} "
            "disagree; they are the same setting, give only one."
        )
    cfg.init_range = cfg.initializer_range
