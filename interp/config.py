"""HookedTransformerConfig: every number that fixes a model's shape and behaviour."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

ACTIVATION_FUNCTIONS = ("gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "gelu_fast", "silu")
# "LNPre"/"RMSPre" are norms whose weights (and bias) were folded into the next layer.
NORMALIZATION_TYPES = ("LN", "LNPre", "RMS", "RMSPre", None)
POSITIONAL_EMBEDDING_TYPES = ("standard", "rotary")
ATTENTION_TYPES = ("global", "local")

# TransformerLens fields for features interp's model does not have yet, with the values under
# which TransformerLens computes exactly what interp computes. Any other value is an error
# naming the field: a config is never half-honoured. (Fields that only tune a feature that is
# off, such as rotary_base without rotary embeddings, are inert in TransformerLens too.)
_ONLY_SUPPORTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "attention_dir": (("causal",), "bidirectional attention"),
    "init_mode": (("gpt2",), "initialisation other than GPT-2's"),
    "n_devices": ((1,), "multi-device splitting"),
    "scale_attn_by_inverse_layer_idx": ((False,), "attention scaled by 1/layer"),
    "final_rms": ((False,), "RMS final norm after layer-norm blocks"),
    "use_hook_tokens": ((False,), "a hook point on the input tokens"),
    "post_embedding_ln": ((False,), "a layer norm after the embedding"),
    "load_in_4bit": ((False,), "4-bit weights"),
    "num_experts": ((None,), "mixture-of-experts MLPs"),
    "experts_per_token": ((None,), "mixture-of-experts MLPs"),
    "relative_attention_max_distance": ((None,), "relative attention (T5)"),
    "relative_attention_num_buckets": ((None,), "relative attention (T5)"),
    "decoder_start_token_id": ((None,), "encoder-decoder models"),
    "use_yarn_rope": ((False,), "YaRN rotary scaling"),
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
    "use_local_attn",
    "use_attn_scale",
    "parallel_attn_mlp",
    "gated_mlp",
    "tie_word_embeddings",
    "use_normalization_before_and_after",
    "use_NTK_by_parts_rope",
    "use_qk_norm",
    "rmsnorm_uses_offset",
)


@dataclass
class HookedTransformerConfig:
    """The shape and options of a transformer: GPT-2, GPT-NeoX (Pythia), Llama, Mistral,
    Qwen 2/3 and Gemma 2/3 are all compositions of these fields.

    Field names, order and defaults follow TransformerLens 2.x/3.x, so its configs port
    unchanged: give ``n_heads`` or ``d_head`` (the other is derived from ``d_model``; give
    both for a ``d_head`` that is not ``d_model / n_heads``); ``d_vocab=-1`` takes the
    vocabulary size from the tokenizer the model is built with; ``d_mlp`` defaults to
    ``4 * d_model`` (``None`` for attention-only models). A TransformerLens field for a
    feature interp does not have (bidirectional attention, mixture of experts, YaRN, ...) is
    accepted at the value that switches it off; any other value is a ``ValueError`` naming
    the field, as is a combination of fields that contradict each other.

    The architecture pieces:

    - ``normalization_type``: "LN" / "LNPre" (layer norm with / without weights), "RMS" /
      "RMSPre" (RMS norm with / without weight), or None; for ``ln1``, ``ln2`` and
      ``ln_final``. ``use_normalization_before_and_after`` adds Gemma's ``ln1_post`` and
      ``ln2_post`` on the attention and MLP outputs (always with weights).
    - ``positional_embedding_type``: "standard" (learned ``W_pos``) or "rotary" (no
      ``pos_embed``: queries and keys are rotated). Rotary options: ``rotary_dim`` (default
      ``d_head``; partial rotary rotates the first ``rotary_dim`` of each head),
      ``rotary_base``, ``rotary_adjacent_pairs`` (False: GPT-NeoX/Llama's rotate-half),
      ``rotary_base_local`` (the base of "local" layers, which then use no rope scaling),
      and one rope scaling: Llama 3's ``use_NTK_by_parts_rope`` with ``NTK_by_parts_*`` and
      ``NTK_original_ctx_len``, or linear ``rotary_scaling_factor`` (1.0 = off).
    - ``n_key_value_heads``: grouped-query attention (None = ``n_heads``); ``use_qk_norm``:
      per-head RMS norms ``attn.q_norm``/``attn.k_norm`` on queries and keys before rotary.
    - ``attn_scale``: the divisor of the attention scores (default ``sqrt(d_head)``, 1 with
      ``use_attn_scale=False``); ``attn_scores_soft_cap`` and ``output_logits_soft_cap``:
      ``cap * tanh(x / cap)`` on the scores and the logits (-1.0 = off).
    - ``use_local_attn`` with ``window_size`` and ``attn_types`` (one "global" or "local" a
      layer): local layers attend to the last ``window_size`` positions only.
    - ``gated_mlp``: ``(act(x @ W_gate) * (x @ W_in) + b_in) @ W_out + b_out``; ``act_fn`` one
      of ``ACTIVATION_FUNCTIONS`` ("gelu_pytorch_tanh" is "gelu_new", "gelu" is exact).
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
        if self.positional_embedding_type not in POSITIONAL_EMBEDDING_TYPES:
            raise ValueError(
                f"positional_embedding_type={self.positional_embedding_type!r} is not supported "
                f"(interp has no shortformer or alibi embeddings); use one of "
                f"{POSITIONAL_EMBEDDING_TYPES}."
            )
        self.dtype = _parse_dtype(self.dtype)
        self._check_supported()
        self._check_blocks()
        self._check_attention()
        self._check_rotary()
        self._resolve_init_range()
        self.n_params = self.n_layers * self.d_model * self.d_head * self.n_heads * 4
        if not self.attn_only:
            self.n_params += self.n_layers * self.d_model * self.d_mlp * (2 + self.gated_mlp)
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

    def _check_blocks(self) -> None:
        """Norms, MLP and block layout that contradict each other."""
        if self.parallel_attn_mlp and self.attn_only:
            raise ValueError(
                "parallel_attn_mlp=True runs the MLP beside the attention, but attn_only=True "
                "has no MLP; set parallel_attn_mlp=False or attn_only=False."
            )
        if self.use_normalization_before_and_after and self.normalization_type is None:
            raise ValueError(
                "use_normalization_before_and_after=True adds norms after attention and the "
                "MLP, but normalization_type=None has no norm; set normalization_type (e.g. "
                "'RMS') or use_normalization_before_and_after=False."
            )
        if self.rmsnorm_uses_offset and self.normalization_type in ("LN", "LNPre"):
            raise ValueError(
                "rmsnorm_uses_offset=True makes RMS norms scale by 1 + w, but "
                f"normalization_type={self.normalization_type!r} is a layer norm; set "
                "normalization_type='RMS' or rmsnorm_uses_offset=False."
            )
        if self.tie_word_embeddings and self.d_vocab_out != self.d_vocab:
            raise ValueError(
                f"tie_word_embeddings=True makes W_U a copy of W_E.T, but d_vocab_out="
                f"{self.d_vocab_out} != d_vocab={self.d_vocab}; set d_vocab_out=-1 or "
                "tie_word_embeddings=False."
            )
        for name in ("attn_scores_soft_cap", "output_logits_soft_cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number, got {value!r}; -1.0 turns it off.")
            if value < 0 and value != -1.0:
                raise ValueError(
                    f"{name}={value} is negative; give a positive cap, or -1.0 to turn it off."
                )

    def _check_attention(self) -> None:
        """Grouped-query heads, the score divisor and sliding windows."""
        if self.n_key_value_heads is not None:
            self._check_positive("n_key_value_heads")
            if self.n_heads % self.n_key_value_heads:
                divisors = [k for k in range(1, self.n_heads + 1) if self.n_heads % k == 0]
                raise ValueError(
                    f"n_heads={self.n_heads} is not divisible by n_key_value_heads="
                    f"{self.n_key_value_heads}: each key/value head serves the same number of "
                    f"query heads; use n_key_value_heads in {divisors}."
                )
            if self.ungroup_grouped_query_attention and self.n_key_value_heads != self.n_heads:
                raise ValueError(
                    "ungroup_grouped_query_attention=True is not supported yet (interp keeps "
                    "n_key_value_heads keys and values and expands them for scoring only); "
                    "leave ungroup_grouped_query_attention at False."
                )
        if isinstance(self.attn_scale, bool) or not isinstance(self.attn_scale, (int, float)):
            raise ValueError(f"attn_scale must be a number, got {self.attn_scale!r}.")
        if not self.use_attn_scale:
            if self.attn_scale not in (-1.0, 1.0):
                raise ValueError(
                    f"use_attn_scale=False divides the scores by 1, but attn_scale="
                    f"{self.attn_scale}; leave attn_scale at -1 or set use_attn_scale=True."
                )
            self.attn_scale = 1.0
        elif self.attn_scale == -1.0:
            self.attn_scale = math.sqrt(self.d_head)
        elif self.attn_scale <= 0:
            raise ValueError(
                f"attn_scale={self.attn_scale} must be positive (the scores are divided by "
                f"it); leave it at -1 for sqrt(d_head)={math.sqrt(self.d_head):g}."
            )
        self._check_local_attention()

    def _check_local_attention(self) -> None:
        """``use_local_attn``, ``window_size`` and ``attn_types`` as TransformerLens: local
        layers are the "local" entries of ``attn_types``, with a window of ``window_size``."""
        if self.attn_types is not None:
            if not isinstance(self.attn_types, (list, tuple)) or len(self.attn_types) != (
                self.n_layers
            ):
                raise ValueError(
                    f"attn_types must list one of {ATTENTION_TYPES} for each of the n_layers="
                    f"{self.n_layers} layers, got {self.attn_types!r}."
                )
            unknown = sorted({str(t) for t in self.attn_types if t not in ATTENTION_TYPES})
            if unknown:
                raise ValueError(
                    f"attn_types has unknown entries {unknown}; each layer is one of "
                    f"{ATTENTION_TYPES}."
                )
            self.attn_types = list(self.attn_types)
        has_local = self.attn_types is not None and "local" in self.attn_types
        if self.window_size is not None:
            if isinstance(self.window_size, bool) or not isinstance(self.window_size, int):
                raise ValueError(
                    f"window_size must be a positive integer, got {self.window_size!r}."
                )
            self._check_positive("window_size")
        if not self.use_local_attn:
            if self.window_size is not None or has_local:
                raise ValueError(
                    f"window_size={self.window_size!r} and attn_types={self.attn_types!r} take "
                    "effect only with use_local_attn=True (as in TransformerLens); set "
                    "use_local_attn=True, or window_size=None and no 'local' attn_types."
                )
            return
        if self.window_size is None or self.attn_types is None:
            raise ValueError(
                "use_local_attn=True needs window_size (how many positions a local layer "
                "sees) and attn_types (one 'global' or 'local' a layer); got window_size="
                f"{self.window_size!r}, attn_types={self.attn_types!r}."
            )
        if not has_local:
            raise ValueError(
                f"window_size={self.window_size} applies to 'local' layers, but attn_types has "
                "none; mark the windowed layers 'local' in attn_types, or set "
                "use_local_attn=False and window_size=None."
            )

    def _check_rotary(self) -> None:
        """Rotary fields: ``rotary_dim`` defaults to ``d_head``; one rope scaling at most."""
        for name in ("rotary_base", "rotary_base_local", "rotary_scaling_factor"):
            value = getattr(self, name)
            if value is None and name == "rotary_base_local":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}.")
        if self.positional_embedding_type != "rotary":
            return  # the rotary fields are inert, as in TransformerLens
        if self.rotary_dim is None:
            self.rotary_dim = self.d_head
        if (
            isinstance(self.rotary_dim, bool)
            or not isinstance(self.rotary_dim, int)
            or self.rotary_dim <= 0
            or self.rotary_dim % 2
            or self.rotary_dim > self.d_head
        ):
            raise ValueError(
                f"rotary_dim={self.rotary_dim!r} must be a positive even number at most d_head="
                f"{self.d_head} (rotary turns pairs of dimensions); e.g. rotary_dim="
                f"{self.d_head} (all of each head) or {max(2, self.d_head // 4 // 2 * 2)} "
                "(a quarter, as Pythia)."
            )
        if self.use_NTK_by_parts_rope:
            if self.rotary_scaling_factor != 1.0:
                raise ValueError(
                    "use_NTK_by_parts_rope=True and rotary_scaling_factor="
                    f"{self.rotary_scaling_factor} are two rope scalings; use one (set "
                    "rotary_scaling_factor=1.0 or use_NTK_by_parts_rope=False)."
                )
            for name in (
                "NTK_by_parts_factor",
                "NTK_by_parts_low_freq_factor",
                "NTK_by_parts_high_freq_factor",
                "NTK_original_ctx_len",
            ):
                value = getattr(self, name)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                    raise ValueError(f"{name} must be a positive number, got {value!r}.")
            if self.NTK_by_parts_high_freq_factor <= self.NTK_by_parts_low_freq_factor:
                raise ValueError(
                    f"NTK_by_parts_high_freq_factor={self.NTK_by_parts_high_freq_factor} must "
                    f"exceed NTK_by_parts_low_freq_factor={self.NTK_by_parts_low_freq_factor} "
                    "(Llama 3 uses 4.0 and 1.0)."
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
