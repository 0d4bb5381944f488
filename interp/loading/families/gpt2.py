"""GPT-2 (``GPT2LMHeadModel``): learned position embeddings, LayerNorm blocks with biases, a
4x MLP (``gelu_new``), Conv1D weights stored [in, out], a fused ``c_attn`` for Q, K and V, tied
embeddings unless config.json says otherwise. Its checkpoint names carry a ``transformer.``
prefix (dropped here) and older ones the causal-mask buffers ``attn.bias`` /
``attn.masked_bias`` (ignored). nanoGPT's checkpoints use the same layout
(``interp.loading.nanogpt``).

A config.json without ``model_type`` reads as GPT-2 (as interp has always read it) unless its
``architectures`` name another family; a checkpoint with no tokenizer files gets GPT-2's.

Example:
    >>> import transformers
    >>> GPT2.hooked_config(transformers.GPT2Config(n_layer=2).to_dict()).n_layers
    2
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import einops
import torch
from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import TensorSource, check_names_and_shapes
from interp.loading.families.base import check_tied
from interp.loading.families.config_fields import activation, flag, positive_int, positive_number
from interp.utils.dtypes import parse_dtype

# Causal-mask buffers that older transformers versions saved with the weights.
_HF_MASK_BUFFER = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")

# config.json fields every GPT-2 checkpoint has: (meaning, GPT-2 small's value).
_REQUIRED_HF_FIELDS = {
    "n_layer": ("the number of layers", 12),
    "n_embd": ("d_model", 768),
    "n_head": ("the number of heads", 12),
    "n_positions": ("the context length", 1024),
    "vocab_size": ("the vocabulary size", 50257),
}


GPT2_VOCAB_SIZE = 50257


def fits_gpt2_tokenizer(vocab_size: int | None) -> bool:
    """Whether GPT-2's tokenizer can stand in for a GPT-2 checkpoint's missing one: every id
    it produces is in the model's vocabulary (50,257, or padded beyond as nanoGPT's 50,304).

    Example:
        >>> fits_gpt2_tokenizer(50304), fits_gpt2_tokenizer(97)
        (True, False)
    """
    return vocab_size is None or vocab_size >= GPT2_VOCAB_SIZE


def config_from_hf(hf_config: Any, **overrides: Any) -> HookedTransformerConfig:
    """The config of a Hugging Face ``GPT2Config`` (or its dict), refusing unsupported options
    and naming any field that is missing, null or of the wrong type.

    Example:
        >>> import transformers
        >>> config_from_hf(transformers.GPT2Config(n_layer=2)).n_layers
        2
    """
    values = hf_config if isinstance(hf_config, dict) else hf_config.to_dict()
    architectures = values.get("architectures") or ["GPT2LMHeadModel"]
    if values.get("model_type", "gpt2") != "gpt2":
        raise ValueError(
            f"This checkpoint is a {values.get('model_type')!r} model ({architectures}), not "
            "GPT-2; load it with load_hf_folder or HookedTransformer.from_pretrained."
        )
    for name, (meaning, example) in _REQUIRED_HF_FIELDS.items():
        value = values.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            state = "is missing" if name not in values else f"is {value!r}"
            raise ValueError(
                f"field {name!r} ({meaning}) {state}; it must be a positive integer "
                f"(GPT-2 small has {name}={example})."
            )
    if flag(values, "scale_attn_by_inverse_layer_idx"):
        raise ValueError(
            "field 'scale_attn_by_inverse_layer_idx' is true, which interp does not support yet."
        )
    if values.get("scale_attn_weights") is not None and not flag(values, "scale_attn_weights"):
        raise ValueError("field 'scale_attn_weights' is false, which interp does not support yet.")
    flag(values, "tie_word_embeddings")  # read by load_hf_folder; checked here, with the config
    if values.get("n_inner") is not None:
        positive_int(values, "n_inner")
    for name in ("torch_dtype", "dtype"):  # unused (weights load in float32), but must be valid
        if isinstance(values.get(name), str) and values[name] != "auto":
            try:
                parse_dtype(values[name])
            except ValueError:
                raise ValueError(
                    f"field {name!r} is {values[name]!r}, not a torch dtype (e.g. 'float32')."
                ) from None
    d_model = values["n_embd"]
    cfg = dict(
        n_layers=values["n_layer"],
        d_model=d_model,
        n_heads=values["n_head"],
        d_mlp=values.get("n_inner") or 4 * d_model,
        n_ctx=values["n_positions"],
        d_vocab=values["vocab_size"],
        act_fn=activation({"activation_function": "gelu_new"} | values, "activation_function"),
        eps=positive_number({"layer_norm_epsilon": 1e-5} | values, "layer_norm_epsilon", 1e-5),
        model_name=values.get("_name_or_path") or "gpt2",
        tokenizer_name="gpt2" if fits_gpt2_tokenizer(values["vocab_size"]) else None,
    )
    cfg.update(overrides)
    return HookedTransformerConfig(**cfg)


def hf_shapes(cfg: HookedTransformerConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every tensor of a ``GPT2LMHeadModel`` checkpoint of shape ``cfg``.

    Names are without the ``transformer.`` prefix; ``lm_head.weight`` (absent when the
    embeddings are tied) is not listed.

    Example:
        >>> import transformers
        >>> cfg = config_from_hf(transformers.GPT2Config(n_layer=2))   # GPT-2 small's widths
        >>> hf_shapes(cfg)["h.0.attn.c_attn.weight"]   # Conv1D: [d_model, 3 * d_model]
        (768, 2304)
    """
    m, mlp = cfg.d_model, cfg.d_mlp
    hd = cfg.n_heads * cfg.d_head  # d_model (a tensor-parallel shard's heads: less)
    shapes = {"wte.weight": (cfg.d_vocab, m), "wpe.weight": (cfg.n_ctx, m)}
    for layer in range(cfg.n_layers):
        hf = f"h.{layer}."
        shapes |= {
            hf + "ln_1.weight": (m,),
            hf + "ln_1.bias": (m,),
            hf + "attn.c_attn.weight": (m, 3 * hd),
            hf + "attn.c_attn.bias": (3 * hd,),
            hf + "attn.c_proj.weight": (hd, m),
            hf + "attn.c_proj.bias": (m,),
            hf + "ln_2.weight": (m,),
            hf + "ln_2.bias": (m,),
            hf + "mlp.c_fc.weight": (m, mlp),
            hf + "mlp.c_fc.bias": (mlp,),
            hf + "mlp.c_proj.weight": (mlp, m),
            hf + "mlp.c_proj.bias": (m,),
        }
    return shapes | {"ln_f.weight": (m,), "ln_f.bias": (m,)}


def check_hf_source(
    source: TensorSource, cfg: HookedTransformerConfig, what: str, needs_lm_head: bool = False
) -> TensorSource:
    """``source`` with names stripped of ``transformer.``, after checking every name and shape.

    The causal-mask buffers of old checkpoints (``attn.bias``, ``attn.masked_bias``) are
    dropped; an ``lm_head.weight`` is an untied unembedding (used even when config.json says
    the embeddings are tied, as Hugging Face does; saved alone, it is the embedding too),
    required when ``needs_lm_head`` (a config.json with ``tie_word_embeddings: false``).
    """
    stripped = {name.removeprefix("transformer."): name for name in source.shapes}
    found = {
        name: source.shapes[original]
        for name, original in stripped.items()
        if not _HF_MASK_BUFFER.match(name)
    }
    if not needs_lm_head and "wte.weight" not in found and "lm_head.weight" in found:
        # Tied embeddings saved under the unembedding's name: Hugging Face ties wte to it.
        found["wte.weight"] = found.pop("lm_head.weight")
        stripped["wte.weight"] = stripped.pop("lm_head.weight")
    expected = hf_shapes(cfg)
    if "lm_head.weight" in found or needs_lm_head:
        expected["lm_head.weight"] = (cfg.d_vocab_out, cfg.d_model)
    hint = "Names are shown without the 'transformer.' prefix."
    if needs_lm_head and "lm_head.weight" not in found:
        hint += (
            " config.json says tie_word_embeddings: false, so the unembedding is its own "
            "lm_head.weight; if it is the embedding's, set tie_word_embeddings to true."
        )
    check_names_and_shapes(found, expected, what, hint=hint)
    return TensorSource(found, lambda name: source.take(stripped[name]))


def iter_hf_tensors(
    source: TensorSource, cfg: HookedTransformerConfig, tied_in: str | None = None
) -> Iterator[tuple[str, Tensor]]:
    """Our parameters, one at a time, from a checked ``GPT2LMHeadModel`` source.

    Conv1D weights are stored [in, out]; the fused ``c_attn`` splits into per-head
    W_Q/W_K/W_V [n_heads, d_model, d_head]. A missing ``lm_head`` means tied embeddings;
    one that differs from the embedding in ``tied_in`` (a checkpoint, named, whose config
    ties them) is used with a warning, as Hugging Face does. Tensors may be views of the
    checkpoint's; ``build_model`` makes each its own.
    """
    n_heads, qkv_width = cfg.n_heads, cfg.n_heads * cfg.d_head  # d_model, or a shard's heads
    embedding = source.take("wte.weight")  # [d_vocab, d_model]
    yield "embed.W_E", embedding
    has_lm_head = "lm_head.weight" in source.shapes
    unembedding = source.take("lm_head.weight") if has_lm_head else embedding
    if has_lm_head and tied_in is not None:
        check_tied(embedding, unembedding, "wte.weight", "lm_head.weight", tied_in)
    yield "unembed.W_U", unembedding.T  # [d_model, d_vocab]
    yield "unembed.b_U", torch.zeros(cfg.d_vocab_out, dtype=embedding.dtype)
    del embedding, unembedding
    yield "pos_embed.W_pos", source.take("wpe.weight")
    for layer in range(cfg.n_layers):
        hf, ours = f"h.{layer}.", f"blocks.{layer}."
        yield ours + "ln1.w", source.take(hf + "ln_1.weight")
        yield ours + "ln1.b", source.take(hf + "ln_1.bias")
        qkv_weight = source.take(hf + "attn.c_attn.weight").split(qkv_width, dim=1)  # 3 x [m, m]
        qkv_bias = source.take(hf + "attn.c_attn.bias").split(qkv_width)
        for name, weight, bias in zip("QKV", qkv_weight, qkv_bias, strict=True):
            yield ours + f"attn.W_{name}", einops.rearrange(weight, "m (h d) -> h m d", h=n_heads)
            yield ours + f"attn.b_{name}", einops.rearrange(bias, "(h d) -> h d", h=n_heads)
        del qkv_weight, qkv_bias
        yield (
            ours + "attn.W_O",
            einops.rearrange(source.take(hf + "attn.c_proj.weight"), "(h d) m -> h d m", h=n_heads),
        )
        yield ours + "attn.b_O", source.take(hf + "attn.c_proj.bias")
        yield ours + "ln2.w", source.take(hf + "ln_2.weight")
        yield ours + "ln2.b", source.take(hf + "ln_2.bias")
        yield ours + "mlp.W_in", source.take(hf + "mlp.c_fc.weight")
        yield ours + "mlp.b_in", source.take(hf + "mlp.c_fc.bias")
        yield ours + "mlp.W_out", source.take(hf + "mlp.c_proj.weight")
        yield ours + "mlp.b_out", source.take(hf + "mlp.c_proj.bias")
    yield "ln_final.w", source.take("ln_f.weight")
    yield "ln_final.b", source.take("ln_f.bias")


def convert_hf_state_dict(
    hf_state_dict: dict[str, Tensor], cfg: HookedTransformerConfig
) -> dict[str, Tensor]:
    """Rename and reshape a ``GPT2LMHeadModel`` state dict into our parameter names.

    Example:
        >>> import transformers
        >>> hf_model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        ...     n_layer=1, n_embd=32, n_head=2, n_positions=16, vocab_size=100))
        >>> ours = HookedTransformer(config_from_hf(hf_model.config))
        >>> ours.load_state_dict(convert_hf_state_dict(hf_model.state_dict(), ours.cfg))
        <All keys matched successfully>
    """
    state_dict = TensorSource.from_state_dict(hf_state_dict)
    converted = dict(iter_hf_tensors(check_hf_source(state_dict, cfg, "The state dict"), cfg))
    state_dict.warn_non_finite("The state dict")
    return converted


class Gpt2Family:
    """GPT-2's adapter, with the interface of ``Family`` that the loaders use (``name``,
    ``architectures``, ``model_types``, ``default_tokenizer``, ``hooked_config``,
    ``checked_tensors``); its checks and conversion are the functions above rather than a
    ``Row`` table."""

    name = "GPT-2"
    architectures = ("GPT2LMHeadModel",)
    model_types = ("gpt2",)
    default_tokenizer = "gpt2"

    def hooked_config(self, hf_config: dict[str, Any], **overrides: Any) -> HookedTransformerConfig:
        """The ``HookedTransformerConfig`` of a GPT-2 config.json (``config_from_hf``)."""
        return config_from_hf(hf_config, **overrides)

    def checked_tensors(
        self,
        source: TensorSource,
        cfg: HookedTransformerConfig,
        hf_config: dict[str, Any],
        what: str,
    ) -> Iterator[tuple[str, Tensor]]:
        """Every name and shape checked now, then our parameters one at a time. A config.json
        with ``tie_word_embeddings: false`` needs its own ``lm_head.weight``; one that ties
        them but holds a different ``lm_head`` gets a warning (``iter_hf_tensors``)."""
        untied = hf_config.get("tie_word_embeddings") is False
        checked = check_hf_source(source, cfg, what, needs_lm_head=untied)
        return iter_hf_tensors(checked, cfg, tied_in=None if untied else what)


GPT2 = Gpt2Family()
