"""Reading a Hugging Face config.json's fields for a family's config mapping: each reader
returns the field's value if it is valid, else a ``ValueError`` naming the field and what it
must be (a positive integer, a flag, rope settings, a sliding window, ...).

Example:
    >>> positive_int({"hidden_size": 64}, "hidden_size")
    64
"""

from __future__ import annotations

import math
from typing import Any

from interp.config import ACTIVATION_FUNCTIONS


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
