"""What every model family's adapter is made of: a config mapping and a tensor table.

A family maps its Hugging Face ``config.json`` to ``HookedTransformerConfig`` fields, and
lists the checkpoint's tensors as ``Row``s: each a checkpoint name, the shape its config
implies, and how it becomes our parameters. One table serves both the check (every name
and shape, before any weight is read) and the conversion (one tensor at a time).
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import einops
import torch
from torch import Tensor

from interp.config import ACTIVATION_FUNCTIONS, HookedTransformerConfig
from interp.loading.checkpoint import Shape, TensorSource, check_names_and_shapes

Convert = Callable[[Tensor | None], dict[str, Tensor]]


@dataclass(frozen=True)
class Row:
    """One checkpoint tensor (``None``: made from nothing, e.g. a zero bias) of ``shape``,
    and ``convert``, which turns it into our parameters by name. ``convert=None`` marks a
    tensor a checkpoint may hold that is not used (an ``lm_head`` tied to the embedding)."""

    checkpoint: str | None
    shape: Shape
    convert: Convert | None


@dataclass(frozen=True)
class Family:
    """A model family's adapter (see the module docstring).

    ``config`` maps the text model's config.json fields (Hugging Face's defaults already
    filled in) to ``HookedTransformerConfig`` fields; ``table`` lists its tensors for a config.
    ``renames`` replace checkpoint name prefixes (a multimodal wrapper's); ``ignored``
    matches checkpoint tensors that are not weights of the text model.
    """

    name: str
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    defaults: dict[str, Any]
    config: Callable[[dict[str, Any]], dict[str, Any]]
    table: Callable[[HookedTransformerConfig, dict[str, Any]], list[Row]]
    renames: tuple[tuple[str, str], ...] = ()
    ignored: re.Pattern[str] = field(default=re.compile(r"$^"))

    def text_values(self, hf_config: dict[str, Any]) -> dict[str, Any]:
        """config.json's text-model fields (a multimodal wrapper's ``text_config``) over
        Hugging Face's defaults for this family, as ``transformers`` reads them."""
        values = hf_config.get("text_config") or hf_config
        if not isinstance(values, dict):
            raise ValueError(
                f"field 'text_config' is {values!r}; it must be a JSON object of the text "
                "model's config fields."
            )
        merged = self.defaults | values
        if "tie_word_embeddings" in hf_config and "text_config" in hf_config:
            merged["tie_word_embeddings"] = hf_config["tie_word_embeddings"]
        return merged

    def hooked_config(self, hf_config: dict[str, Any], **overrides: Any) -> HookedTransformerConfig:
        """The ``HookedTransformerConfig`` of a config.json of this family.

        Example:
            >>> import transformers
            >>> from interp.loading.families import LLAMA
            >>> config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64,
            ...     num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2)
            >>> LLAMA.hooked_config(config.to_dict()).n_key_value_heads   # or a config.json's
            2
        """
        values = self.text_values(hf_config)
        architectures = hf_config.get("architectures") or [self.architectures[0]]
        name = hf_config.get("_name_or_path") or self.name
        fields = self.config(values) | dict(
            original_architecture=architectures[0], model_name=name, tokenizer_name=name
        )
        return HookedTransformerConfig(**(fields | overrides))

    def checked_source(
        self,
        source: TensorSource,
        cfg: HookedTransformerConfig,
        hf_config: dict[str, Any],
        what: str,
    ) -> tuple[TensorSource, list[Row]]:
        """``source`` under canonical names, and the rows to convert, after checking every
        name and shape against what ``cfg`` implies (one error lists every problem).

        An unembedding the checkpoint holds although ``cfg`` ties it to the embedding is used
        (as Hugging Face does), with a warning when the two differ (``untied_by_checkpoint``);
        a tied checkpoint that holds the unembedding alone gives it to the embedding too.
        """
        originals: dict[str, str] = {}
        for name in source.shapes:
            canonical = self.canonical_name(name)
            if canonical is not None:
                originals[canonical] = name
        values = self.text_values(hf_config)
        rows = self.table(cfg, values)
        head = next((row for row in rows if row.convert is None), None)
        embedding_name = rows[0].checkpoint
        if head is not None and head.checkpoint in originals:
            if embedding_name not in originals:  # Hugging Face ties the embedding to the head
                originals[embedding_name] = originals.pop(head.checkpoint)
            else:
                untied = copy.copy(cfg)
                untied.tie_word_embeddings = False
                rows = untied_by_checkpoint(self.table(untied, values), head.checkpoint, what)
        found = {canonical: source.shapes[name] for canonical, name in originals.items()}
        expected = {
            row.checkpoint: row.shape for row in rows if row.checkpoint and row.convert is not None
        }
        hints = []
        if self.renames and any(originals[name] != name for name in found):
            prefixes = ", ".join(repr(old) for old, _ in self.renames)
            hints.append(
                f"Names are shown with the text model's prefix (the checkpoint has {prefixes})."
            )
        head_name = unembedding_name(rows)
        if not cfg.tie_word_embeddings and head_name not in found:
            hints.append(
                f"config.json says tie_word_embeddings: false, so the unembedding is its own "
                f"{head_name}; if it is the embedding's, set tie_word_embeddings to true."
            )
        check_names_and_shapes(found, expected, what, " ".join(hints))
        return TensorSource(found, lambda name: source.take(originals[name])), rows

    def canonical_name(self, name: str) -> str | None:
        """The name of a checkpoint tensor in this family's table, or None if it is ignored."""
        if self.ignored.search(name):
            return None
        for old, new in self.renames:
            if name.startswith(old):
                return new + name.removeprefix(old)
        return name


def iter_tensors(source: TensorSource, rows: list[Row]) -> Iterator[tuple[str, Tensor]]:
    """Our parameters, one checkpoint tensor at a time (each is read once, then forgotten)."""
    for row in rows:
        if row.convert is None:
            continue
        tensor = source.take(row.checkpoint) if row.checkpoint is not None else None
        yield from row.convert(tensor).items()
        del tensor


def unembedding_name(rows: list[Row]) -> str:
    """The checkpoint name of the unembedding in a family's table (its last named row)."""
    return [row.checkpoint for row in rows if row.checkpoint is not None][-1]


def untied_by_checkpoint(rows: list[Row], head_name: str, what: str) -> list[Row]:
    """An untied table (``rows``) for a checkpoint whose config ties the embeddings but which
    holds its own unembedding ``head_name``: Hugging Face keeps that tensor (it ties the two
    only when they are equal), so it is ``W_U`` here too, with a warning when it differs
    from the embedding. The unembedding row moves next to the embedding's, so the two are
    compared as they are read and the embedding is not held longer."""
    embedding_row = rows[0]
    head_row = next(row for row in rows if row.checkpoint == head_name)
    read: dict[str, Tensor] = {}

    def keep_embedding(tensor: Tensor | None) -> dict[str, Tensor]:
        read["embedding"] = tensor
        return embedding_row.convert(tensor)

    def compare_head(tensor: Tensor | None) -> dict[str, Tensor]:
        check_tied(read.pop("embedding"), tensor, embedding_row.checkpoint, head_name, what)
        return head_row.convert(tensor)

    others = [row for row in rows[1:] if row is not head_row]
    return [
        Row(embedding_row.checkpoint, embedding_row.shape, keep_embedding),
        Row(head_name, head_row.shape, compare_head),
        *others,
    ]


def check_tied(
    embedding: Tensor, head: Tensor, embedding_name: str, head_name: str, what: str
) -> None:
    """Warn when a checkpoint whose config ties the embeddings holds an unembedding ``head``
    that differs from its ``embedding`` (Hugging Face then keeps both, and so does interp)."""
    if head.shape != embedding.shape or not torch.equal(head, embedding):
        warnings.warn(
            f"{what}: config.json says tie_word_embeddings: true, but its {head_name} differs "
            f"from its {embedding_name}; the checkpoint's {head_name} is used as the "
            "unembedding (as Hugging Face does). Set tie_word_embeddings to false in "
            "config.json to silence this warning.",
            stacklevel=2,
        )


# ----------------------------------------------------------------------- conversions
def same(name: str) -> Convert:
    """The tensor as it is."""
    return lambda tensor: {name: tensor}


def transposed(name: str) -> Convert:
    """A ``Linear`` weight [out, in] as our [in, out]."""
    return lambda tensor: {name: tensor.T}


def zeros(name: str, shape: Shape) -> Row:
    """A row for a parameter the checkpoint does not have (a bias it lacks): zeros."""
    return Row(None, (), lambda _: {name: torch.zeros(shape)})


def heads_in(name: str, n_heads: int) -> Convert:
    """A q/k/v ``Linear`` weight [n_heads * d_head, d_model] as [n_heads, d_model, d_head]."""
    return lambda tensor: {name: einops.rearrange(tensor, "(h d) m -> h m d", h=n_heads)}


def heads_bias(name: str, n_heads: int) -> Convert:
    """A q/k/v bias [n_heads * d_head] as [n_heads, d_head]."""
    return lambda tensor: {name: einops.rearrange(tensor, "(h d) -> h d", h=n_heads)}


def heads_out(name: str, n_heads: int) -> Convert:
    """An output ``Linear`` weight [d_model, n_heads * d_head] as [n_heads, d_head, d_model]."""
    return lambda tensor: {name: einops.rearrange(tensor, "m (h d) -> h d m", h=n_heads)}


def embedding(cfg: HookedTransformerConfig, tied: bool, scale: bool = False) -> Convert:
    """``W_E`` (and ``W_U = W_E.T`` when ``tied``, taken before any scaling).

    ``scale`` folds Gemma's ``sqrt(d_model)`` embedding multiplier into ``W_E``, rounded as
    Hugging Face rounds it: the multiplier is a tensor of the model's dtype, so a bf16 model
    scales by bf16's nearest value and rounds the product to bf16, as here.
    """

    def convert(tensor: Tensor) -> dict[str, Tensor]:
        converted = {}
        if scale:
            multiplier = torch.tensor(math.sqrt(cfg.d_model), dtype=cfg.dtype).float()
            converted["embed.W_E"] = (tensor.float() * multiplier).to(cfg.dtype)
        else:
            converted["embed.W_E"] = tensor
        if tied:
            converted["unembed.W_U"] = tensor.T
        return converted

    return convert


def unembedding_rows(
    cfg: HookedTransformerConfig,
    tied: bool,
    name: str = "lm_head.weight",
    bias_name: str | None = None,
) -> list[Row]:
    """The rows of ``W_U`` (from ``name``, unless tied to the embedding) and ``b_U`` (from
    ``bias_name``, or zero). ``W_U``'s row stays the table's last named one
    (``unembedding_name``)."""
    shape = (cfg.d_vocab_out, cfg.d_model)
    head = Row(name, shape, None if tied else transposed("unembed.W_U"))
    if bias_name is None:
        return [head, zeros("unembed.b_U", (cfg.d_vocab_out,))]
    return [Row(bias_name, (cfg.d_vocab_out,), same("unembed.b_U")), head]


def shared_norm(ours: str, kind: str) -> Convert:
    """A parallel block's one norm ``kind`` ("w" or "b") as both ``ln1`` and ``ln2``."""
    return lambda tensor: {f"{ours}ln1.{kind}": tensor, f"{ours}ln2.{kind}": tensor.clone()}


# --------------------------------------------------------------------- config fields
def positive_int(values: dict[str, Any], name: str) -> int:
    """``values[name]`` if it is a positive integer, else an error naming the field."""
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        state = "is missing" if name not in values else f"is {value!r}"
        raise ValueError(f"field {name!r} {state}; it must be a positive integer.")
    return value


def positive_number(values: dict[str, Any], name: str, example: float) -> float:
    """``values[name]`` if it is a positive finite number, else an error naming the field."""
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        state = "is missing" if name not in values else f"is {value!r}"
        raise ValueError(f"field {name!r} {state}; it must be a positive number, e.g. {example}.")
    return float(value)


def flag(values: dict[str, Any], name: str) -> bool:
    """``values[name]`` if it is true or false (null or absent: false), else an error naming
    the field (a string "false" would otherwise read as true)."""
    value = values.get(name)
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"field {name!r} is {value!r}; it must be true or false.")
    return bool(value)


def fraction(values: dict[str, Any], name: str, field_name: str | None = None) -> float:
    """``values[name]`` if it is a number in (0, 1], else an error naming the field."""
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(
            f"field {field_name or name!r} is {value!r}; it must be a number in (0, 1], e.g. 0.25."
        )
    return float(value)


def head_dim(values: dict[str, Any]) -> int:
    """``head_dim`` when given, else ``hidden_size / num_attention_heads``."""
    if values.get("head_dim") is not None:
        return positive_int(values, "head_dim")
    hidden, heads = positive_int(values, "hidden_size"), positive_int(values, "num_attention_heads")
    if hidden % heads:
        raise ValueError(
            f"field 'hidden_size' ({hidden}) is not divisible by 'num_attention_heads' "
            f"({heads}), and there is no 'head_dim'; add head_dim to the config."
        )
    return hidden // heads


def kv_heads(values: dict[str, Any]) -> int | None:
    """``n_key_value_heads``: None when every query head has its own keys and values."""
    heads = positive_int(values, "num_attention_heads")
    if values.get("num_key_value_heads") is None:
        return None
    n_kv = positive_int(values, "num_key_value_heads")
    return None if n_kv == heads else n_kv


def activation(values: dict[str, Any], *names: str) -> str:
    """The activation function's name, from the first of ``names`` the config has; one interp
    does not have is an error naming the field."""
    for name in names:
        value = values.get(name)
        if value is None:
            continue
        if value not in ACTIVATION_FUNCTIONS:
            raise ValueError(
                f"field {name!r} is {value!r}; interp supports the activation functions "
                f"{', '.join(ACTIVATION_FUNCTIONS)}."
            )
        return value
    raise ValueError(f"field {names[0]!r} (the activation function) is missing.")


def rope_parameters(values: dict[str, Any], layer_type: str | None = None) -> dict[str, Any]:
    """The rotary settings of a config (of its ``layer_type`` layers when they differ):
    ``rope_theta``, ``rope_type`` and the scaling fields, from transformers 5's
    ``rope_parameters`` or the older ``rope_theta`` / ``rope_scaling`` fields; a field that
    is not a JSON object is an error naming it."""
    params = rope_object(values, "rope_parameters")
    if layer_type is not None and layer_type in params:
        params = rope_object(params, layer_type, f"rope_parameters.{layer_type}")
    legacy = rope_object(values, "rope_scaling")
    merged = {**legacy, **params}
    merged.setdefault("rope_theta", values.get("rope_theta", 10000.0))
    merged["rope_type"] = merged.get("rope_type") or merged.get("type") or "default"
    return merged


def rope_object(values: dict[str, Any], name: str, field_name: str | None = None) -> dict:
    """``values[name]`` as a dict ({} when absent or null), or an error naming the field."""
    value = values.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(
            f"field {field_name or name!r} is {value!r}; it must be a JSON object of rope "
            'settings, e.g. {"rope_type": "linear", "factor": 4.0}.'
        )
    return value


def rope_field_names(values: dict[str, Any], layer_type: str | None = None) -> tuple[str, str]:
    """The config.json fields that hold a config's rope scaling and its ``rope_theta`` (for
    error messages): ``rope_parameters`` (or its ``layer_type`` entry) or ``rope_scaling``."""
    params = values.get("rope_parameters")
    if not isinstance(params, dict):
        return "rope_scaling", "rope_theta"
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        where, params = f"rope_parameters.{layer_type}", params[layer_type]
    else:
        where = "rope_parameters"
    return where, f"{where}.rope_theta" if "rope_theta" in params else "rope_theta"


# What each supported rope type needs beyond rope_theta: (name, example) of every field.
_ROPE_SCALING_FIELDS = {
    "default": (),
    "linear": (("factor", 4.0),),
    "llama3": (("factor", 8.0), ("low_freq_factor", 1.0), ("high_freq_factor", 4.0)),
}


def rope_fields(
    values: dict[str, Any], max_positions: int, layer_type: str | None = None
) -> dict[str, Any]:
    """``HookedTransformerConfig`` fields for a config's rope setting (its ``layer_type``
    layers' when they differ): base and scaling (Llama 3's NTK-by-parts or linear). Another
    rope type, or a field that is missing or not a positive number, is an error naming it."""
    params = rope_parameters(values, layer_type)
    where, theta_field = rope_field_names(values, layer_type)
    rope_type = params["rope_type"]
    if rope_type not in _ROPE_SCALING_FIELDS:
        raise ValueError(
            f"rope type {rope_type!r} (field {where!r}) is not supported; interp supports "
            "'default', 'linear' and 'llama3'."
        )
    number = {
        name: rope_number(params, name, f"{where}.{name}", example, rope_type)
        for name, example in _ROPE_SCALING_FIELDS[rope_type]
    }
    fields: dict[str, Any] = {
        "rotary_base": rope_number(params, "rope_theta", theta_field, 10000.0, rope_type)
    }
    if rope_type == "llama3":
        original = params.get("original_max_position_embeddings") or max_positions
        if isinstance(original, bool) or not isinstance(original, int) or original <= 0:
            raise ValueError(
                f"field '{where}.original_max_position_embeddings' is {original!r}; it must be "
                "a positive integer, the context length the model was trained with (8192 for "
                "Llama 3.1)."
            )
        fields |= dict(
            use_NTK_by_parts_rope=True,
            NTK_by_parts_factor=number["factor"],
            NTK_by_parts_low_freq_factor=number["low_freq_factor"],
            NTK_by_parts_high_freq_factor=number["high_freq_factor"],
            NTK_original_ctx_len=original,
        )
    elif rope_type == "linear":
        fields["rotary_scaling_factor"] = number["factor"]
    return fields


def rope_number(
    params: dict[str, Any], name: str, field_name: str, example: float, rope_type: str
) -> float:
    """``params[name]`` as a float, if it is a positive finite number; else an error naming
    the config.json field, the rope type that needs it, an example value and the fix."""
    value = params.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        state = "is missing" if name not in params else f"is {value!r}"
        raise ValueError(
            f"field {field_name!r} {state}; rope type {rope_type!r} needs it, a positive "
            f"number (e.g. {name}: {example}). Add it to config.json, or change the rope type."
        )
    return float(value)


def window_fields(window: int | None, sliding: list[bool]) -> dict[str, Any]:
    """Sliding-window fields: ``attn_types`` "local" where ``sliding`` (one a layer) and a
    window is set, else none at all."""
    if window is None or not any(sliding):
        return {}
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(f"field 'sliding_window' is {window!r}; it must be a positive integer.")
    return dict(
        use_local_attn=True,
        window_size=window,
        attn_types=["local" if local else "global" for local in sliding],
    )


def sliding_layers(values: dict[str, Any], default: list[bool]) -> list[bool]:
    """Which layers use the sliding window: config.json's ``layer_types`` when it has them
    (transformers 5 writes them), else ``default`` (the family's older rule)."""
    layer_types = values.get("layer_types")
    if layer_types is None:
        return default
    n_layers = positive_int(values, "num_hidden_layers")
    if not isinstance(layer_types, list) or len(layer_types) != n_layers:
        raise ValueError(
            f"field 'layer_types' must list one entry for each of the {n_layers} layers, got "
            f"{layer_types!r}."
        )
    unknown = sorted({str(t) for t in layer_types} - {"sliding_attention", "full_attention"})
    if unknown:
        raise ValueError(
            f"field 'layer_types' has {unknown}; interp supports 'sliding_attention' and "
            "'full_attention'."
        )
    return [t == "sliding_attention" for t in layer_types]


def soft_cap(values: dict[str, Any], name: str) -> float:
    """A soft cap (``cap * tanh(x / cap)``) from the config, -1.0 (off) when null."""
    value = values.get(name)
    if value is None:
        return -1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"field {name!r} is {value!r}; it must be a positive number or null.")
    return float(value)
