"""HookedTransformerConfig: every number that fixes a model's shape and behaviour, with its
TransformerLens field names, the fields derived from others, dict round trips and the
GPT-2 family's presets. What makes a config valid is in ``interp.config.checks``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from interp.config.checks import (
    check_attention,
    check_blocks,
    check_choices,
    check_rotary,
    check_supported,
    check_types,
    resolve_heads,
    resolve_init_range,
)
from interp.config.expert_checks import (
    check_experts,
    check_gpt_oss_experts,
    check_mxfp4_experts,
)
from interp.utils.dtypes import parse_dtype

__all__ = ["HookedTransformerConfig", "preset_config"]


@dataclass
class HookedTransformerConfig:
    """The shape and options of a transformer: GPT-2, GPT-NeoX (Pythia), Llama, Mistral,
    Qwen 2/3 and Gemma 2/3 are all compositions of these fields.

    Field names, order and defaults follow TransformerLens 2.x/3.x, so its configs port
    unchanged: give ``n_heads`` or ``d_head`` (the other is derived from ``d_model``; give
    both for a ``d_head`` that is not ``d_model / n_heads``); ``d_vocab=-1`` takes the
    vocabulary size from the tokenizer the model is built with; ``d_mlp`` defaults to
    ``4 * d_model`` (``None`` for attention-only models). A TransformerLens field for a
    feature interp does not have (YaRN, relative attention, ...) is
    accepted at the value that switches it off; any other value is a ``ValueError`` naming
    the field, as is a combination of fields that contradict each other.

    The architecture pieces:

    - ``normalization_type``: "LN" / "LNPre" (layer norm with / without weights), "RMS" /
      "RMSPre" (RMS norm with / without weight), or None; for ``ln1``, ``ln2`` and
      ``ln_final``. ``use_normalization_before_and_after`` adds Gemma's ``ln1_post`` and
      ``ln2_post`` on the attention and MLP outputs (always with weights).
    - ``positional_embedding_type``: "standard" (learned ``W_pos``), "shortformer" (learned
      ``W_pos`` added to each block's normalised query and key inputs only, not to the values or the
      residual stream: TransformerLens's attn-only-Nl, gelu-Nl and solu-Nl toy models) or "rotary"
      (no ``pos_embed``: queries and keys are rotated). Rotary options: ``rotary_dim`` (default
      ``d_head``; partial rotary rotates the first ``rotary_dim`` of each head), ``rotary_base``,
      ``rotary_adjacent_pairs`` (False: GPT-NeoX/Llama's rotate-half), ``rotary_base_local`` (the
      base of "local" layers, which then use no rope scaling), and one rope scaling: Llama 3's
      ``use_NTK_by_parts_rope`` with ``NTK_by_parts_*`` and ``NTK_original_ctx_len``, or linear
      ``rotary_scaling_factor`` (1.0 = off).
    - ``n_key_value_heads``: grouped-query attention (None = ``n_heads``); ``use_qk_norm``:
      per-head RMS norms ``attn.q_norm``/``attn.k_norm`` on queries and keys before rotary.
    - ``attn_scale``: the divisor of the attention scores (default ``sqrt(d_head)``, 1 with
      ``use_attn_scale=False``); ``attn_scores_soft_cap`` and ``output_logits_soft_cap``:
      ``cap * tanh(x / cap)`` on the scores and the logits (-1.0 = off).
    - ``use_local_attn`` with ``window_size`` and ``attn_types`` (one "global" or "local" a
      layer): local layers attend to the last ``window_size`` positions only.
    - ``gated_mlp``: ``(act(x @ W_gate) * (x @ W_in) + b_in) @ W_out + b_out``; ``act_fn`` one
      of ``ACTIVATION_FUNCTIONS`` ("gelu_pytorch_tanh" is "gelu_new", "gelu" is exact;
      "solu" is ``x * softmax(x)``, and "solu_ln" adds the MLP's layer norm ``mlp.ln`` after
      it, with ``mlp.hook_mid`` before that norm; "xielu" has trainable parameters,
      ``mlp.act_fn.alpha_p``/``alpha_n``).
    - ``num_experts`` and ``experts_per_token``: a mixture-of-experts MLP
      (``interp.components.moe``): a router chooses ``experts_per_token`` of ``num_experts``
      gated experts (each of ``d_mlp``) per token; ``norm_topk_prob``,
      ``expert_weights_in_float32`` and ``d_mlp_shared_expert`` follow the families' routers.
    - ``attention_dir``: "causal", or "bidirectional" (every position attends to every key,
      as an encoder; as in TransformerLens an ``attention_mask`` then only sets the
      positions, so padding keys are attended unless masked, e.g. by a hook on
      ``attn.hook_attn_scores``).
    - ``parallel_attn_mlp``: attention and MLP both read ``resid_pre`` (GPT-NeoX, GPT-J).
    - ``rmsnorm_uses_offset`` (TransformerLens 4's name): RMS norms scale by ``1 + w``, as
      Gemma's, multiplying in float32 and rounding once, as Hugging Face does; ``w`` is the
      checkpoint's own weight (TransformerLens 2.x folds the 1 into ``w``, which a bf16 or
      fp16 ``w`` cannot hold as precisely). LayerNorm models have no such norm.
    - ``tie_word_embeddings``: ``W_U`` starts as a copy of ``W_E.T`` (a copy, not shared, as
      TransformerLens loads tied checkpoints). Gemma's ``sqrt(d_model)`` embedding scale is
      folded into ``W_E`` when its checkpoints load, rounded as Hugging Face rounds it.

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=2, d_model=64, n_ctx=32, d_head=16, d_vocab=100)
        >>> cfg.n_heads, cfg.d_mlp
        (4, 256)
        >>> llama = HookedTransformerConfig(n_layers=2, d_model=64, n_ctx=128, n_heads=4,
        ...     n_key_value_heads=2, d_vocab=100, normalization_type="RMS", act_fn="silu",
        ...     gated_mlp=True, d_mlp=172, positional_embedding_type="rotary", rotary_base=500000)
        >>> llama.d_head, llama.rotary_dim   # rotary_dim defaults to d_head
        (16, 16)
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
    use_yarn_rope: bool = False
    rotary_base_local: int | None = None  # the rotary base of "local" layers (Gemma 3)
    rotary_scaling_factor: float = 1.0  # linear rope scaling: positions / factor
    rmsnorm_uses_offset: bool = False  # RMS norms scale by 1 + w (Gemma), in float32
    # interp's own: torch's scaled_dot_product_attention when no score/pattern hook is active.
    use_fast_attention: bool = True
    # interp's own: half-precision queries and keys are scored in float32 (GPT-Neo's, as
    # Hugging Face computes them), on the explicit attention path.
    attn_scores_float32: bool = False
    # interp's own: Phi 3's LongRoPE: a factor per rotary frequency for positions within
    # longrope_original_ctx_len and past it, and a multiplier of the cosines and sines.
    longrope_short_factor: list[float] | None = None
    longrope_long_factor: list[float] | None = None
    longrope_original_ctx_len: int | None = None
    longrope_attention_factor: float = 1.0
    # interp's own, OLMo 2's: the norms ln1_post/ln2_post after attention and the MLP and
    # none before them; and QK norms over all heads' features of a position at once.
    use_post_norms_only: bool = False
    qk_norm_across_heads: bool = False
    # interp's own: RMS norms multiply by w in float32 and cast once (OLMo 2's rounding).
    rmsnorm_weight_in_float32: bool = False
    # interp's own: half-precision queries and keys rotated in float32, cast once (OLMo 2's).
    rotary_in_float32: bool = False
    # interp's own, with TransformerLens's switch use_yarn_rope: YaRN rope scaling (gpt-oss),
    # as Hugging Face's _compute_yarn_parameters: frequencies blended between unscaled and
    # divided by yarn_factor over the band set by yarn_beta_fast/slow rotations within
    # yarn_original_ctx_len (rounded outwards with yarn_truncate), and the cosines and sines
    # multiplied by yarn_attention_factor (None: 0.1 * ln(yarn_factor) + 1).
    yarn_factor: float = 1.0
    yarn_original_ctx_len: int | None = None
    yarn_beta_fast: float = 32.0
    yarn_beta_slow: float = 1.0
    yarn_truncate: bool = True
    yarn_attention_factor: float | None = None
    # interp's own: attention sinks (gpt-oss): a learned logit per head (attn.W_sinks) that
    # joins every query's softmax as one more key with no value, so the pattern of the
    # real keys sums to less than 1 (hook_pattern holds the real keys only, as Hugging Face).
    use_attn_sinks: bool = False
    # interp's own: gpt-oss's mixture of experts (interp.components.moe_gpt_oss), chosen by
    # experts_swiglu_limit: router and expert biases, the top-k logits softmaxed among
    # themselves, experts (clamp(up, +-limit) + 1) * g * sigmoid(alpha * g), g = min(gate, limit).
    experts_swiglu_limit: float | None = None
    experts_swiglu_alpha: float = 1.702
    # interp's own: gpt-oss's experts kept in MXFP4 (interp.components.mxfp4_experts): each
    # expert's W_gate/W_in/W_out stored as uint8 blocks and scales (about a quarter of bf16's
    # bytes) and dequantized per expert in the forward, to the same numbers as at load.
    experts_mxfp4: bool = False
    # interp's own, mixture-of-experts routing as Hugging Face's (see interp.components.moe):
    # whether the top-k router probabilities are renormalised to sum to 1 (Mixtral: always;
    # Qwen-MoE and OLMoE: their norm_topk_prob), whether they scale the experts' outputs in
    # float32 (Mixtral) rather than the model's dtype, and the size of Qwen2-MoE's shared
    # expert (None: no shared expert).
    norm_topk_prob: bool = True
    expert_weights_in_float32: bool = False
    d_mlp_shared_expert: int | None = None
    init_range: float = 0.02  # weights ~ N(0, init_range) at initialisation
    # Tensor parallel: the number of processes whose blocks each hold a slice of the heads and
    # neurons (interp.distributed; 1: the whole model in this process).
    tp_size: int = 1
    # Free-form facts about where the weights came from (not used by the forward pass).
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_types(self)
        resolve_heads(self)
        if self.attn_only:
            self.d_mlp = None
        elif self.d_mlp is None:
            self.d_mlp = 4 * self.d_model
        if self.d_vocab_out in (-1, None):
            self.d_vocab_out = self.d_vocab
        check_choices(self)
        self.dtype = parse_dtype(self.dtype)
        check_supported(self)
        check_blocks(self)
        check_experts(self)
        check_gpt_oss_experts(self)
        check_mxfp4_experts(self)
        check_attention(self)
        check_rotary(self)
        resolve_init_range(self)
        self.n_params = self.n_layers * self.d_model * self.d_head * self.n_heads * 4
        if not self.attn_only:
            mlp_params = self.d_model * self.d_mlp * (2 + self.gated_mlp)
            if self.num_experts:  # each expert and its router column, as TransformerLens
                mlp_params = (mlp_params + self.d_model) * self.num_experts
            self.n_params += self.n_layers * mlp_params
        if self.device is not None:
            from interp.utils.devices import check_device

            check_device(self.device)

    def is_layer_norm_activation(self) -> bool:
        """Whether ``act_fn`` is followed by a layer norm inside the MLP (SoLU's "solu_ln"), as
        TransformerLens's method: the name ends in "_ln"."""
        return self.act_fn is not None and self.act_fn.endswith("_ln")

    def set_d_vocab_from_tokenizer(self, tokenizer: Any) -> None:
        """Resolve ``d_vocab=-1`` (and ``d_vocab_out=-1``) to the tokenizer's vocabulary size,
        as TransformerLens does when a model is built with a tokenizer.

        Example:
            >>> cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, d_head=4)
            >>> cfg.d_vocab   # not given: take it from the tokenizer
            -1
            >>> cfg.set_d_vocab_from_tokenizer(interp.get_tokenizer("gpt2"))   # shipped
            >>> cfg.d_vocab, cfg.d_vocab_out
            (50257, 50257)
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
            >>> cfg = HookedTransformerConfig(n_layers=2, d_model=64, n_ctx=32, d_head=16)
            >>> cfg.to_dict()["n_heads"]
            4
            >>> HookedTransformerConfig(**cfg.to_dict()) == cfg
            True
        """
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> HookedTransformerConfig:
        """Build a config from ``to_dict`` output or a saved ``config.json`` (``dtype`` as a
        name), naming unknown and missing keys.

        Example:
            >>> cfg = HookedTransformerConfig.from_dict({"n_layers": 1, "d_model": 8, "n_ctx": 4,
            ...                                          "n_heads": 2, "dtype": "bfloat16"})
            >>> cfg.dtype, cfg.d_head
            (torch.bfloat16, 4)
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
