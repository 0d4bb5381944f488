"""Hugging Face checkpoints: folders, hub ids and in-memory models, of GPT-2 (whose adapter
is this module's ``config_from_hf``/``hf_shapes``/``iter_hf_tensors``) and of the families in
``interp.loading.families`` (GPT-NeoX, Llama, Mistral, Qwen 2/3, Gemma 2/3)."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import einops
import torch
from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import (
    MODEL_DTYPES,
    CheckpointError,
    TensorSource,
    build_model,
    check_names_and_shapes,
    parse_torch_dtype,
    printable,
    read_config_json,
    resolve_dtype,
)
from interp.loading.families import family_for, is_gpt2, iter_tensors
from interp.loading.families.base import (
    activation,
    check_tied,
    flag,
    positive_int,
    positive_number,
)
from interp.loading.tokenizer_files import HF_TOKENIZER_FILES, tokenizer_from_folder
from interp.tokenizers import get_tokenizer

# Causal-mask buffers that older transformers versions saved with the weights.
_HF_MASK_BUFFER = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
# (sharded index, single file) for each weights format, in order of preference.
_HF_WEIGHT_FILES = (
    ("model.safetensors.index.json", "model.safetensors"),
    ("pytorch_model.bin.index.json", "pytorch_model.bin"),
)


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
    it produces is in the model's vocabulary (50,257, or padded beyond as nanoGPT's 50,304)."""
    return vocab_size is None or vocab_size >= GPT2_VOCAB_SIZE


def config_from_hf(hf_config: Any, **overrides: Any) -> HookedTransformerConfig:
    """The config of a Hugging Face ``GPT2Config`` (or its dict), refusing unsupported options
    and naming any field that is missing, null or of the wrong type.

    Example:
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
                parse_torch_dtype(values[name])
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
        >>> hf_shapes(cfg)["h.0.attn.c_attn.weight"]   # Conv1D: [d_model, 3 * d_model]
        (768, 2304)
    """
    m, mlp = cfg.d_model, cfg.d_mlp
    shapes = {"wte.weight": (cfg.d_vocab, m), "wpe.weight": (cfg.n_ctx, m)}
    for layer in range(cfg.n_layers):
        hf = f"h.{layer}."
        shapes |= {
            hf + "ln_1.weight": (m,),
            hf + "ln_1.bias": (m,),
            hf + "attn.c_attn.weight": (m, 3 * m),
            hf + "attn.c_attn.bias": (3 * m,),
            hf + "attn.c_proj.weight": (m, m),
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
    n_heads, d_model = cfg.n_heads, cfg.d_model
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
        qkv_weight = source.take(hf + "attn.c_attn.weight").split(d_model, dim=1)  # 3 x [m, m]
        qkv_bias = source.take(hf + "attn.c_attn.bias").split(d_model)
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
        >>> model.load_state_dict(convert_hf_state_dict(hf_model.state_dict(), model.cfg))
    """
    state_dict = TensorSource.from_state_dict(hf_state_dict)
    converted = dict(iter_hf_tensors(check_hf_source(state_dict, cfg, "The state dict"), cfg))
    state_dict.warn_non_finite("The state dict")
    return converted


def checkpoint_state_dict(hf_model: Any) -> dict[str, Tensor]:
    """The model's tensors under the names and layout ``save_pretrained`` writes, which the
    family tables describe: transformers 5 fuses some in memory (a mixture of experts'
    per-expert projections into one [experts, ...] tensor) and splits them again on saving."""
    from transformers.core_model_loading import revert_weight_conversion

    return revert_weight_conversion(hf_model, hf_model.state_dict())


def from_hf_model(hf_model: Any, tokenizer: Any = "gpt2") -> Any:
    """A HookedTransformer with the weights of an in-memory Hugging Face model of a supported
    architecture (``GPT2LMHeadModel``, ``LlamaForCausalLM``, ...), in its dtype and on its device.

    Example:
        >>> model = from_hf_model(transformers.GPT2LMHeadModel(transformers.GPT2Config()))
    """
    parameter = next(hf_model.parameters())
    if parameter.dtype not in MODEL_DTYPES:
        raise ValueError(
            f"The Hugging Face model's weights are {parameter.dtype} (a quantized model?), a "
            f"dtype a model cannot compute in here; load it unquantized in one of "
            f"{', '.join(map(str, MODEL_DTYPES))} (e.g. from_pretrained(..., "
            "dtype=torch.bfloat16)), or pass its checkpoint folder instead."
        )
    hf_config = hf_model.config.to_dict()
    state_dict = TensorSource.from_state_dict(checkpoint_state_dict(hf_model))
    if is_gpt2(hf_config):
        cfg = config_from_hf(hf_config, dtype=parameter.dtype)
        source = check_hf_source(state_dict, cfg, "The model")
        tensors = iter_hf_tensors(source, cfg)
    else:
        hf_config["architectures"] = [type(hf_model).__name__]
        family = family_for(hf_config)
        cfg = family.hooked_config(hf_config, dtype=parameter.dtype)
        source, rows = family.checked_source(state_dict, cfg, hf_config, "The model")
        tensors = iter_tensors(source, rows)
    model = build_model(cfg, tensors, tokenizer, parameter.device)
    state_dict.warn_non_finite(f"The {type(hf_model).__name__}")
    return model


def hf_folder_source(folder: Path) -> TensorSource:
    """The weights of a Hugging Face checkpoint folder: ``model.safetensors``, a sharded
    ``model.safetensors.index.json``, ``pytorch_model.bin`` or its sharded index.

    Every tensor it gives is read for this load alone (no memory map, no caller's dict).
    """
    for index_name, single_name in _HF_WEIGHT_FILES:
        if (folder / single_name).is_file():
            paths = [folder / single_name]
        elif (folder / index_name).is_file():
            paths = _shard_paths(folder / index_name)
        else:
            continue
        if single_name.endswith(".safetensors"):
            return TensorSource.from_safetensors(paths)
        return TensorSource.from_torch_files(paths)
    present = sorted(p.name for p in folder.iterdir())
    raise FileNotFoundError(
        f"{printable(folder)} has no weights: expected model.safetensors, "
        "model.safetensors.index.json, pytorch_model.bin or pytorch_model.bin.index.json, "
        f"found {present}."
    )


def _shard_paths(index_path: Path) -> list[Path]:
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"{printable(index_path)} is not a valid shard index: {error!r}."
        ) from None
    paths = [index_path.parent / name for name in dict.fromkeys(weight_map.values())]
    missing = [path.name for path in paths if not path.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{printable(index_path)} lists shards that are missing: {missing}."
        )
    return paths


def folder_tokenizer(
    folder: Path, gpt2_fallback: bool = True, vocab_size: int | None = None
) -> Any:
    """The Hugging Face tokenizer saved in a checkpoint folder; without one, the offline
    GPT-2 tokenizer (``gpt2_fallback``, for GPT-2 checkpoints whose ``vocab_size`` holds
    GPT-2's 50,257 tokens) or None (with a warning when the vocabulary is not GPT-2's)."""
    if not any((folder / name).is_file() for name in HF_TOKENIZER_FILES):
        if gpt2_fallback and not fits_gpt2_tokenizer(vocab_size):
            warnings.warn(
                f"{printable(folder)} has no tokenizer files and its {vocab_size}-token "
                f"vocabulary is not GPT-2's ({GPT2_VOCAB_SIZE}): the model has no tokenizer. "
                "Run it on token ids, or pass tokenizer=... (one of its vocabulary).",
                stacklevel=3,
            )
            return None
        return get_tokenizer("gpt2") if gpt2_fallback else None
    try:
        return tokenizer_from_folder(folder)
    except ImportError:
        if not gpt2_fallback:
            raise
        warnings.warn(
            f"{printable(folder)} has a tokenizer but transformers is not installed; using the "
            "offline GPT-2 tokenizer instead (pip install transformers to use the folder's).",
            stacklevel=3,
        )
        return get_tokenizer("gpt2")


def load_hf_folder(
    folder: str | Path,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
) -> Any:
    """A HookedTransformer from a Hugging Face checkpoint folder of a supported architecture
    (``SUPPORTED_ARCHITECTURES``), in float32 unless ``dtype`` says otherwise.

    Every tensor's name and shape is checked against the config before any is read; the
    tensors are then read one at a time and placed on ``device``, so loading peaks near the
    model's size. The tokenizer is the folder's (``tokenizer.json``), else GPT-2's.

    Example:
        >>> hf_model.save_pretrained("my-llama"); model = load_hf_folder("my-llama")
    """
    dtype = resolve_dtype(dtype, torch.float32)
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(
            f"{printable(folder)} has no config.json; it is not a checkpoint folder."
        )
    hf_config = read_config_json(config_path)
    what = f"The checkpoint in {printable(folder)}"
    if is_gpt2(hf_config):
        cfg = _checked_config(config_path, "GPT-2", lambda: config_from_hf(hf_config, dtype=dtype))
        cfg.model_name = hf_config.get("_name_or_path") or folder.name
        weights = hf_folder_source(folder)
        untied = hf_config.get("tie_word_embeddings") is False
        source = check_hf_source(weights, cfg, what, needs_lm_head=untied)
        tensors = iter_hf_tensors(source, cfg, tied_in=None if untied else what)
    else:
        family = family_for(hf_config)
        cfg = _checked_config(
            config_path, family.name, lambda: family.hooked_config(hf_config, dtype=dtype)
        )
        cfg.model_name = cfg.tokenizer_name = hf_config.get("_name_or_path") or folder.name
        weights = hf_folder_source(folder)
        source, rows = family.checked_source(weights, cfg, hf_config, what)
        tensors = iter_tensors(source, rows)
    if tokenizer is None:
        tokenizer = folder_tokenizer(folder, is_gpt2(hf_config), cfg.d_vocab)
    model = build_model(cfg, tensors, tokenizer, device, printable(folder), fresh=True)
    weights.warn_non_finite(what)
    return model


def _checked_config(
    config_path: Path, family: str, make: Callable[[], HookedTransformerConfig]
) -> HookedTransformerConfig:
    """``make()``, its errors said as errors of the config file, with the fix."""
    try:
        return make()
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            f"{printable(config_path)} is not a valid {family} config: {printable(error)} Fix "
            "that field in the file, or save the model again with save_pretrained."
        ) from None


def download_from_hub(repo_id: str) -> Path:
    """The local folder of a hub repo's checkpoint, from the Hugging Face cache when the hub
    cannot be reached. Only the config, tokenizer and one weights format are fetched.

    Example:
        >>> download_from_hub("gpt2")
        PosixPath('/root/.cache/huggingface/hub/models--gpt2/snapshots/607a30d783dfa663caf39e06633721c8d4cfcd7e')
    """
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    patterns = ["config.json", *HF_TOKENIZER_FILES]
    safetensors_patterns = [
        "model.safetensors",
        "model.safetensors.index.json",
        "model-*.safetensors",
    ]
    torch_patterns = ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"]
    try:
        folder = Path(
            huggingface_hub.snapshot_download(
                repo_id, allow_patterns=patterns + safetensors_patterns
            )
        )
        if not any((folder / name).is_file() for name in safetensors_patterns[:2]):
            folder = Path(
                huggingface_hub.snapshot_download(repo_id, allow_patterns=patterns + torch_patterns)
            )
        return folder
    except (RepositoryNotFoundError, GatedRepoError) as error:
        raise FileNotFoundError(
            f"{repo_id!r} is not a local folder, and the Hugging Face hub has no repo by that name "
            f"that you can access ({type(error).__name__}). Check the spelling, or log in with "
            "`hf auth login` for a gated or private repo."
        ) from None
    except Exception as online_error:  # no network, offline mode, or a hub outage
        try:
            return Path(huggingface_hub.snapshot_download(repo_id, local_files_only=True))
        except Exception:
            raise FileNotFoundError(
                f"{repo_id!r} is not a local folder, is not in the Hugging Face cache "
                f"({huggingface_hub.constants.HF_HUB_CACHE}), and the hub could not be reached "
                f"({type(online_error).__name__}: {online_error}). Connect to the internet once "
                "to download it (it is cached for offline use afterwards; unset HF_HUB_OFFLINE "
                "if set), point HF_HOME at a cache that has it, or pass the path of a local "
                "checkpoint folder."
            ) from None
