"""nanoGPT checkpoints: ``out/ckpt.pt`` from ``train.py``, or a bare ``GPT.state_dict()``.

nanoGPT's ``model.py`` is GPT-2 with ``nn.Linear`` layers (weights [out, in], the transpose
of Hugging Face's Conv1D), exact-erf GELU, an ``lm_head`` tied to ``wte``, optional biases
(``bias=False`` drops them from every linear layer and layer norm), and often a vocabulary
padded to 50304. Its tensors are mapped onto Hugging Face's layout and converted from there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import (
    CheckpointError,
    TensorSource,
    build_model,
    check_names_and_shapes,
    load_torch_file,
    resolve_dtype,
)
from interp.loading.hf import iter_hf_tensors
from interp.loading.model_names import MODEL_NAME_UNSTATED

_COMPILED_PREFIX = "_orig_mod."  # added to every key by torch.compile
_MASK_BUFFER = re.compile(r"^transformer\.h\.\d+\.attn\.bias$")  # causal mask, without flash
_LAYER_KEY = re.compile(r"^transformer\.h\.(\d+)\.")
# nn.Linear weights, stored [out, in]; Hugging Face's Conv1D stores them [in, out].
_LINEAR_WEIGHTS = (
    "attn.c_attn.weight",
    "attn.c_proj.weight",
    "mlp.c_fc.weight",
    "mlp.c_proj.weight",
)
_GPT2_VOCAB_SIZE = 50257


def nanogpt_shapes(args: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every key of nanoGPT's ``GPT.state_dict()`` for ``model_args``, with its shape.

    Example:
        >>> nanogpt_shapes(dict(n_layer=1, n_embd=8, vocab_size=50304, block_size=16, bias=False))
        {'transformer.wte.weight': (50304, 8), ...}
    """
    m, bias = args["n_embd"], args["bias"]
    shapes = {
        "transformer.wte.weight": (args["vocab_size"], m),
        "transformer.wpe.weight": (args["block_size"], m),
    }
    layer_shapes = {
        "ln_1.weight": (m,),
        "attn.c_attn.weight": (3 * m, m),
        "attn.c_proj.weight": (m, m),
        "ln_2.weight": (m,),
        "mlp.c_fc.weight": (4 * m, m),
        "mlp.c_proj.weight": (m, 4 * m),
    }
    bias_shapes = {
        "ln_1.bias": (m,),
        "attn.c_attn.bias": (3 * m,),
        "attn.c_proj.bias": (m,),
        "ln_2.bias": (m,),
        "mlp.c_fc.bias": (4 * m,),
        "mlp.c_proj.bias": (m,),
    }
    for layer in range(args["n_layer"]):
        for name, shape in (layer_shapes | (bias_shapes if bias else {})).items():
            shapes[f"transformer.h.{layer}.{name}"] = shape
    shapes["transformer.ln_f.weight"] = (m,)
    if bias:
        shapes["transformer.ln_f.bias"] = (m,)
    shapes["lm_head.weight"] = (args["vocab_size"], m)
    return shapes


def load_nanogpt(
    checkpoint: str | Path | dict[str, Any],
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
    model_args: dict[str, Any] | None = None,
) -> Any:
    """A HookedTransformer from a nanoGPT checkpoint file or dict (fp32 unless ``dtype``).

    ``checkpoint`` is ``train.py``'s ``{"model": state_dict, "model_args": {...}, ...}`` or a
    bare state dict (keys may carry torch.compile's ``_orig_mod.`` prefix). A bare state dict
    does not record ``n_head``: pass ``model_args={"n_head": ...}``. The tokenizer defaults to
    GPT-2's when the vocabulary holds it (padded vocabularies included), else none.

    Example:
        >>> args = dict(n_layer=1, n_head=2, n_embd=8, vocab_size=65, block_size=16, bias=False)
        >>> state_dict = {name: torch.randn(shape) for name, shape in nanogpt_shapes(args).items()}
        >>> checkpoint = {"model": state_dict, "model_args": args}   # or its path: out/ckpt.pt
        >>> model = load_nanogpt(checkpoint, device="cpu", dtype=torch.bfloat16)
        >>> model.cfg.n_layers, model.cfg.dtype, model.tokenizer   # no GPT-2 vocabulary
        (1, torch.bfloat16, None)
    """
    dtype = resolve_dtype(dtype, torch.float32)
    if isinstance(checkpoint, dict):
        name, contents = "The nanoGPT checkpoint", checkpoint
    else:  # mapped, so an optimizer state stored alongside costs no memory
        name, contents = str(checkpoint), load_torch_file(checkpoint, mmap=True)
    if isinstance(contents, dict) and isinstance(contents.get("model"), dict):
        state_dict, args = contents["model"], dict(contents.get("model_args") or {})
    elif isinstance(contents, dict):
        state_dict, args = contents, {}
    else:
        raise CheckpointError(
            f"{name} holds a {type(contents).__name__}, not a nanoGPT state dict."
        )
    state_dict = {
        key.removeprefix(_COMPILED_PREFIX): value
        for key, value in state_dict.items()
        if not _MASK_BUFFER.match(key.removeprefix(_COMPILED_PREFIX))
    }
    args = _inferred_args(state_dict, name) | args | (model_args or {})
    if "n_head" not in args:
        raise CheckpointError(
            f"{name} is a bare state dict, which does not record the number of heads; pass "
            "model_args={'n_head': ...} (GPT-2 small has 12)."
        )
    _check_args(args, name)
    tied = _same_storage(state_dict.get("lm_head.weight"), state_dict["transformer.wte.weight"])
    raw = TensorSource.from_state_dict(state_dict)
    check_names_and_shapes(raw.shapes, nanogpt_shapes(args), name)

    cfg = HookedTransformerConfig(
        n_layers=args["n_layer"],
        d_model=args["n_embd"],
        n_heads=args["n_head"],
        d_mlp=4 * args["n_embd"],
        n_ctx=args["block_size"],
        d_vocab=args["vocab_size"],
        act_fn="gelu",  # nanoGPT's nn.GELU() is the exact erf form
        eps=1e-5,
        model_name=Path(name).stem if not isinstance(checkpoint, dict) else "nanogpt",
        tokenizer_name="gpt2" if args["vocab_size"] >= _GPT2_VOCAB_SIZE else None,
        original_architecture="nanoGPT",
        dtype=dtype,
    )
    cfg.extra[MODEL_NAME_UNSTATED] = True  # a nanoGPT checkpoint names no model
    if tokenizer is None and cfg.tokenizer_name is not None:
        tokenizer = cfg.tokenizer_name
    source = _as_hf_layout(raw, args, tied)
    model = build_model(cfg, iter_hf_tensors(source, cfg), tokenizer, device, name)
    raw.warn_non_finite(name)
    return model


def _inferred_args(state_dict: dict[str, Tensor], name: str) -> dict[str, Any]:
    """The model_args that the tensors' shapes determine (all but ``n_head``)."""
    if "transformer.wte.weight" not in state_dict or "transformer.wpe.weight" not in state_dict:
        sample = sorted(state_dict)[:5]
        raise CheckpointError(
            f"{name} is not a nanoGPT checkpoint: it has no transformer.wte.weight / "
            f"transformer.wpe.weight (its keys begin {sample}). For a Hugging Face folder use "
            "HookedTransformer.from_pretrained."
        )
    for key in ("transformer.wte.weight", "transformer.wpe.weight"):
        tensor = state_dict[key]
        if not isinstance(tensor, Tensor) or tensor.ndim != 2:
            shape = tuple(tensor.shape) if isinstance(tensor, Tensor) else type(tensor).__name__
            raise CheckpointError(
                f"{name}: {key} is {shape}, but an embedding is a 2-D [rows, n_embd] tensor; "
                "the checkpoint is corrupt or not nanoGPT's, so save it again from "
                "GPT.state_dict()."
            )
    vocab_size, n_embd = state_dict["transformer.wte.weight"].shape
    layers = {int(match.group(1)) for key in state_dict if (match := _LAYER_KEY.match(key))}
    return {
        "n_layer": max(layers, default=-1) + 1,
        "n_embd": n_embd,
        "vocab_size": vocab_size,
        "block_size": state_dict["transformer.wpe.weight"].shape[0],
        "bias": "transformer.ln_f.bias" in state_dict,
    }


# model_args that must be positive integers: (meaning, GPT-2 small's value).
_INTEGER_ARGS = {
    "n_layer": ("the number of layers", 12),
    "n_head": ("the number of heads", 12),
    "n_embd": ("d_model", 768),
    "block_size": ("the context length", 1024),
    "vocab_size": ("the vocabulary size", 50304),
}


def _check_args(args: dict[str, Any], name: str) -> None:
    """A ``CheckpointError`` naming a model_args value of the wrong type or out of range."""
    for key, (meaning, example) in _INTEGER_ARGS.items():
        value = args[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise CheckpointError(
                f"{name}: model_args {key!r} ({meaning}) is {value!r}; it must be a positive "
                f"integer (GPT-2 small has {key}={example})."
            )
    if not isinstance(args["bias"], bool):
        raise CheckpointError(
            f"{name}: model_args 'bias' is {args['bias']!r}; it must be true or false."
        )
    if args["n_embd"] % args["n_head"]:
        raise CheckpointError(
            f"{name}: model_args n_embd={args['n_embd']} is not divisible by n_head="
            f"{args['n_head']}; pass the n_head the model was trained with."
        )


def _same_storage(first: Tensor | None, second: Tensor) -> bool:
    return first is not None and first.untyped_storage().data_ptr() == (
        second.untyped_storage().data_ptr()
    )


def _as_hf_layout(raw: TensorSource, args: dict[str, Any], tied: bool) -> TensorSource:
    """nanoGPT tensors under Hugging Face's names and layout; zero biases when ``bias=False``.

    A ``lm_head`` tied to ``wte`` (nanoGPT's default) is left out, as Hugging Face does.
    """
    zeros_like_bias = {}
    if not args["bias"]:
        m = args["n_embd"]
        for layer in range(args["n_layer"]):
            hf = f"h.{layer}."
            zeros_like_bias |= {
                hf + "ln_1.bias": m,
                hf + "attn.c_attn.bias": 3 * m,
                hf + "attn.c_proj.bias": m,
                hf + "ln_2.bias": m,
                hf + "mlp.c_fc.bias": 4 * m,
                hf + "mlp.c_proj.bias": m,
            }
        zeros_like_bias["ln_f.bias"] = m

    def original_name(name: str) -> str:
        return name if name == "lm_head.weight" else "transformer." + name

    def read(name: str) -> Tensor:
        if name in zeros_like_bias:
            return torch.zeros(zeros_like_bias[name])
        tensor = raw.take(original_name(name))
        return tensor.T if name.endswith(_LINEAR_WEIGHTS) else tensor

    shapes = {name.removeprefix("transformer."): shape for name, shape in raw.shapes.items()}
    shapes = {
        name: shape[::-1] if name.endswith(_LINEAR_WEIGHTS) else shape
        for name, shape in shapes.items()
    }
    shapes |= {name: (size,) for name, size in zeros_like_bias.items()}
    if tied:
        shapes.pop("lm_head.weight")  # the same tensor as wte (nanoGPT's weight tying)
    return TensorSource(shapes, read)
