"""TransformerLens 2.18's ``get_pretrained_model_config``: a model's HookedTransformerConfig
from its config.json (a local folder, or the Hugging Face cache: offline once cached), field
for field what TL 2.18 returns for the same file, its quirks included:

- Mistral, Qwen 2 and Qwen 3 get ``n_ctx=2048`` (TL caps them; not Mixtral, which also has
  no window), Gemma ``8192``, Llama 3.1+
  ``2048``; Llama's ``rope_theta`` is read only for TL's named Llama models.
- Llama (a local folder), Llama 2/3, CodeLlama and Gemma names follow TL's per-name tables,
  which hold the published configs' values; here they are read from the config.json itself.
- GPT-Neo and GPT-J get ``d_mlp = 4 d_model`` and GPT-J and OPT ``eps=1e-5`` whatever their
  config says, Phi-3 the whole head as ``rotary_dim``, BLOOM ``n_ctx=2048``, as TL's branches.
- The toy models (``NeelNanda/...``) have TL's own config.json format
  (``convert_neel_model_config``).

``HookedTransformer.from_pretrained`` does not use this: interp's family adapters read every
field of the config (Llama's ``rope_theta`` and rope scaling, Qwen's context length), so its
model's ``cfg`` can differ from this in the fields TL ignores or caps.

Example:
    >>> import tempfile, transformers
    >>> folder = Path(tempfile.mkdtemp())   # "pythia-70m" reads the cached hub config.json
    >>> transformers.GPTNeoXConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=1,
    ...     intermediate_size=128, vocab_size=100, rotary_pct=0.25,
    ...     architectures=["GPTNeoXForCausalLM"]).save_pretrained(folder)
    >>> get_pretrained_model_config(str(folder)).rotary_dim   # a quarter of d_head = 16
    4
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import torch

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import printable, read_config_json
from interp.loading.families.base import rope_parameters, sliding_layers
from interp.loading.families.gpt_neo import attention_layers
from interp.loading.model_names import get_official_model_name, is_transformer_lens_repo
from interp.loading.tl_toy_config import is_transformer_lens_config, neel_config_dict
from interp.utils.tensors import get_device

logger = logging.getLogger(__name__)

# The context length TL 2.18 gives a named model instead of its config's (prefix of the name
# after its owner -> n_ctx). Mistral, Qwen 2 and Qwen 3 are capped for any name or folder,
# Gemma set to 8192.
_TL_NAMED_N_CTX = {
    "Llama-2-": 4096,
    "CodeLlama-": 4096,
    "Meta-Llama-3-": 8192,
    "Llama-3.1-": 2048,
    "Llama-3.2-": 2048,
    "Llama-3.3-": 2048,
}
_CAPPED_N_CTX = 2048
# transformers' defaults for fields a config.json may leave out.
_HF_DEFAULTS = {
    "GPT2LMHeadModel": dict(
        layer_norm_epsilon=1e-5, activation_function="gelu_new",
        scale_attn_by_inverse_layer_idx=False,
    ),
    "GPTNeoXForCausalLM": dict(layer_norm_eps=1e-5, hidden_act="gelu"),
    "LlamaForCausalLM": dict(rms_norm_eps=1e-6, hidden_act="silu"),
    "MistralForCausalLM": dict(
        rms_norm_eps=1e-6, hidden_act="silu", sliding_window=4096, num_key_value_heads=8
    ),
    "MixtralForCausalLM": dict(
        rms_norm_eps=1e-5, hidden_act="silu", num_key_value_heads=8, num_local_experts=8,
        num_experts_per_tok=2, max_position_embeddings=4096 * 32,
    ),
    "Qwen2ForCausalLM": dict(
        rms_norm_eps=1e-6, hidden_act="silu", initializer_range=0.02, num_key_value_heads=32
    ),
    "Qwen3ForCausalLM": dict(
        rms_norm_eps=1e-6, hidden_act="silu", initializer_range=0.02, num_key_value_heads=32,
        head_dim=128,
    ),
    "Gemma2ForCausalLM": dict(
        rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", initializer_range=0.02,
        sliding_window=4096, query_pre_attn_scalar=256, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0,
    ),
    "Gemma3ForCausalLM": dict(
        rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", initializer_range=0.02,
        sliding_window=4096, query_pre_attn_scalar=256, rope_local_base_freq=10000.0,
        sliding_window_pattern=6,
    ),
    # transformers 4.57's defaults, which its save_pretrained leaves out of config.json.
    "GPTNeoForCausalLM": dict(
        max_position_embeddings=2048, attention_types=[[["global", "local"], 12]],
        window_size=256, activation_function="gelu_new", layer_norm_epsilon=1e-5,
    ),
    "OPTForCausalLM": dict(max_position_embeddings=2048, activation_function="relu"),
    "GPTJForCausalLM": dict(n_positions=2048, rotary_dim=64, activation_function="gelu_new"),
    "PhiForCausalLM": dict(
        max_position_embeddings=2048, layer_norm_eps=1e-5, hidden_act="gelu_new",
        initializer_range=0.02, rope_theta=10000.0, partial_rotary_factor=0.5,
    ),
    "Phi3ForCausalLM": dict(
        max_position_embeddings=4096, rms_norm_eps=1e-5, hidden_act="silu",
        initializer_range=0.02, rope_theta=10000.0,
    ),
    "BloomForCausalLM": dict(layer_norm_epsilon=1e-5),
}  # fmt: skip


def _rotary_base(values: dict[str, Any]) -> float:
    return rope_parameters(values)["rope_theta"]


def _gpt2(v: dict[str, Any], named: bool) -> dict[str, Any]:
    return dict(
        d_model=v["n_embd"], d_head=v["n_embd"] // v["n_head"], n_heads=v["n_head"],
        d_mlp=4 * v["n_embd"], n_layers=v["n_layer"], n_ctx=v.get("n_ctx", v["n_positions"]),
        eps=v["layer_norm_epsilon"], d_vocab=v["vocab_size"], act_fn=v["activation_function"],
        use_attn_scale=True, use_local_attn=False,
        scale_attn_by_inverse_layer_idx=v["scale_attn_by_inverse_layer_idx"],
        normalization_type="LN",
    )  # fmt: skip


def _neox(v: dict[str, Any], named: bool) -> dict[str, Any]:
    d_head = v["hidden_size"] // v["num_attention_heads"]
    # transformers 5 calls rotary_pct partial_rotary_factor (also inside rope_parameters).
    rotary_pct = v.get("rotary_pct") or v.get("partial_rotary_factor")
    rotary_pct = rotary_pct or rope_parameters(v).get("partial_rotary_factor", 0.25)
    return dict(
        d_model=v["hidden_size"], d_head=d_head, n_heads=v["num_attention_heads"],
        d_mlp=v["intermediate_size"], n_layers=v["num_hidden_layers"],
        n_ctx=v["max_position_embeddings"], eps=v["layer_norm_eps"], d_vocab=v["vocab_size"],
        act_fn=v["hidden_act"], use_attn_scale=True, use_local_attn=False,
        scale_attn_by_inverse_layer_idx=False, parallel_attn_mlp=True,
        positional_embedding_type="rotary", rotary_adjacent_pairs=False,
        normalization_type="LN", rotary_dim=round(rotary_pct * d_head),
    )  # fmt: skip


def _llama(v: dict[str, Any], named: bool) -> dict[str, Any]:
    """TL's Llama branch; its named Llama models also read the rotary base and Llama 3's
    rope scaling (which TL's per-name tables hold)."""
    n_heads, n_kv = v["num_attention_heads"], v.get("num_key_value_heads")
    d_head = v["hidden_size"] // n_heads
    fields = dict(
        d_model=v["hidden_size"], d_head=d_head, n_heads=n_heads,
        d_mlp=v["intermediate_size"], n_layers=v["num_hidden_layers"],
        n_ctx=v["max_position_embeddings"], eps=v["rms_norm_eps"], d_vocab=v["vocab_size"],
        act_fn=v["hidden_act"], n_key_value_heads=None if n_kv in (None, n_heads) else n_kv,
        normalization_type="RMS", positional_embedding_type="rotary",
        rotary_adjacent_pairs=False, rotary_dim=d_head, final_rms=True, gated_mlp=True,
    )  # fmt: skip
    if named:
        rope = rope_parameters(v)
        fields["rotary_base"] = rope["rope_theta"]
        if rope["rope_type"] == "llama3":
            fields |= dict(
                use_NTK_by_parts_rope=True,
                NTK_by_parts_low_freq_factor=rope["low_freq_factor"],
                NTK_by_parts_high_freq_factor=rope["high_freq_factor"],
                NTK_by_parts_factor=rope["factor"],
                NTK_original_ctx_len=rope["original_max_position_embeddings"],
            )
    return fields


def _mistral(v: dict[str, Any], named: bool) -> dict[str, Any]:
    window, n_heads = v["sliding_window"], v["num_attention_heads"]
    return dict(
        d_model=v["hidden_size"], d_head=v.get("head_dim") or v["hidden_size"] // n_heads,
        n_heads=n_heads, d_mlp=v["intermediate_size"],
        n_layers=v["num_hidden_layers"], n_ctx=_CAPPED_N_CTX, d_vocab=v["vocab_size"],
        act_fn=v["hidden_act"], window_size=window,
        attn_types=["local"] * v["num_hidden_layers"] if window else None,
        eps=v["rms_norm_eps"], rotary_base=_rotary_base(v),
        n_key_value_heads=v["num_key_value_heads"], use_local_attn=bool(window),
        normalization_type="RMS", positional_embedding_type="rotary", gated_mlp=True,
    )  # fmt: skip


def _mixtral(v: dict[str, Any], named: bool) -> dict[str, Any]:
    """TL's Mixtral branch: no window whatever the config says (TL keeps the config's
    sliding_window as an inert window_size, which interp's config refuses without local
    layers: None here), 32 "global" attn_types (cut to the layers), its head as the rotary
    dimension, the full context."""
    n_heads = v["num_attention_heads"]
    return dict(
        dtype=torch.bfloat16, d_model=v["hidden_size"], d_head=v["hidden_size"] // n_heads,
        n_heads=n_heads, d_mlp=v["intermediate_size"], n_layers=v["num_hidden_layers"],
        n_ctx=v["max_position_embeddings"], d_vocab=v["vocab_size"], act_fn=v["hidden_act"],
        normalization_type="RMS", positional_embedding_type="rotary",
        rotary_base=_rotary_base(v), attn_types=["global"] * 32, eps=v["rms_norm_eps"],
        n_key_value_heads=v["num_key_value_heads"], gated_mlp=True, use_local_attn=False,
        rotary_dim=v["hidden_size"] // n_heads, num_experts=v["num_local_experts"],
        experts_per_token=v["num_experts_per_tok"],
    )  # fmt: skip


def _qwen(v: dict[str, Any], named: bool, qwen3: bool = False) -> dict[str, Any]:
    n_heads, n_kv = v["num_attention_heads"], v["num_key_value_heads"]
    d_head = v["hidden_size"] // n_heads  # Qwen 2 ignores head_dim; Qwen 3 reads it
    d_head = (v.get("head_dim") or d_head) if qwen3 else d_head
    fields = dict(
        d_model=v["hidden_size"], d_head=d_head, n_heads=n_heads,
        n_key_value_heads=None if qwen3 and n_kv == n_heads else n_kv,
        d_mlp=v["intermediate_size"], n_layers=v["num_hidden_layers"], n_ctx=_CAPPED_N_CTX,
        eps=v["rms_norm_eps"], d_vocab=v["vocab_size"], act_fn=v["hidden_act"],
        use_attn_scale=True, initializer_range=v["initializer_range"],
        normalization_type="RMS", positional_embedding_type="rotary",
        rotary_base=int(_rotary_base(v)), rotary_adjacent_pairs=False, rotary_dim=d_head,
        tokenizer_prepends_bos=True, final_rms=True, gated_mlp=True, default_prepend_bos=False,
    )  # fmt: skip
    return fields | (dict(use_qk_norm=True, trust_remote_code=True) if qwen3 else {})


def _gemma(v: dict[str, Any], named: bool, gemma3: bool = False) -> dict[str, Any]:
    """TL's Gemma tables: Gemma 2's layers alternate global then local (TL's order), Gemma 3's
    follow the config's sliding pattern; Gemma 3 has QK norms and a local rotary base."""
    n_layers, n_heads = v["num_hidden_layers"], v["num_attention_heads"]
    d_head = v.get("head_dim") or v["hidden_size"] // n_heads
    fields = dict(
        d_model=v["hidden_size"], d_head=d_head, n_heads=n_heads,
        d_mlp=v["intermediate_size"], n_layers=n_layers, n_ctx=8192, eps=v["rms_norm_eps"],
        d_vocab=v["vocab_size"], act_fn=v.get("hidden_activation") or v["hidden_act"],
        initializer_range=v["initializer_range"], normalization_type="RMS",
        rotary_base=_rotary_base(v), positional_embedding_type="rotary", use_attn_scale=True,
        n_key_value_heads=v["num_key_value_heads"], window_size=v["sliding_window"],
        use_local_attn=True, gated_mlp=True, final_rms=True,
        use_normalization_before_and_after=True,
    )  # fmt: skip
    if v["query_pre_attn_scalar"] != d_head:
        fields["attn_scale"] = math.sqrt(v["query_pre_attn_scalar"])
    if not gemma3:
        return fields | dict(
            attn_types=["global", "local"] * ((n_layers + 1) // 2),
            attn_scores_soft_cap=float(v["attn_logit_softcapping"]),
            output_logits_soft_cap=float(v["final_logit_softcapping"]),
        )
    pattern = v.get("_sliding_window_pattern") or v["sliding_window_pattern"]
    sliding = sliding_layers(v, [(layer + 1) % pattern != 0 for layer in range(n_layers)])
    local = (v.get("rope_parameters") or {}).get("sliding_attention") or {}
    return fields | dict(
        rotary_base=rope_parameters(v, "full_attention")["rope_theta"],
        rotary_base_local=local.get("rope_theta", v["rope_local_base_freq"]),
        use_qk_norm=True,
        attn_types=["local" if slides else "global" for slides in sliding],
    )


def _gpt_neo(v: dict[str, Any], named: bool) -> dict[str, Any]:
    """TL's GPT-Neo branch: d_mlp is 4 d_model (it ignores intermediate_size)."""
    layers = attention_layers(v, v["num_layers"])
    return dict(
        d_model=v["hidden_size"], d_head=v["hidden_size"] // v["num_heads"],
        n_heads=v["num_heads"], d_mlp=4 * v["hidden_size"], n_layers=v["num_layers"],
        n_ctx=v["max_position_embeddings"], eps=v["layer_norm_epsilon"],
        d_vocab=v["vocab_size"], attn_types=layers, act_fn=v["activation_function"],
        use_attn_scale=False, use_local_attn=True, window_size=v["window_size"],
        scale_attn_by_inverse_layer_idx=False, normalization_type="LN",
    )  # fmt: skip


def _opt(v: dict[str, Any], named: bool) -> dict[str, Any]:
    return dict(
        d_model=v["hidden_size"], d_head=v["hidden_size"] // v["num_attention_heads"],
        n_heads=v["num_attention_heads"], d_mlp=v["ffn_dim"], n_layers=v["num_hidden_layers"],
        n_ctx=v["max_position_embeddings"], eps=1e-5, d_vocab=v["vocab_size"],
        act_fn=v["activation_function"], use_attn_scale=True, use_local_attn=False,
        scale_attn_by_inverse_layer_idx=False, normalization_type="LN",
    )  # fmt: skip


def _gptj(v: dict[str, Any], named: bool) -> dict[str, Any]:
    """TL's GPT-J branch: d_mlp is 4 d_model (it ignores n_inner), eps 1e-5."""
    return dict(
        d_model=v["n_embd"], d_head=v["n_embd"] // v["n_head"], n_heads=v["n_head"],
        d_mlp=4 * v["n_embd"], n_layers=v["n_layer"], n_ctx=v["n_positions"], eps=1e-5,
        d_vocab=v["vocab_size"], act_fn=v["activation_function"], use_attn_scale=True,
        use_local_attn=False, scale_attn_by_inverse_layer_idx=False, parallel_attn_mlp=True,
        positional_embedding_type="rotary", rotary_dim=v["rotary_dim"],
        rotary_adjacent_pairs=True, normalization_type="LN",
    )  # fmt: skip


def _phi(v: dict[str, Any], named: bool, phi3: bool = False) -> dict[str, Any]:
    """TL's Phi and Phi-3 branches: Phi's rotary_dim rounds partial_rotary_factor * d_head;
    Phi-3's is d_head (TL ignores its partial rotary and LongRoPE)."""
    n_heads = v["num_attention_heads"]
    d_head = v["hidden_size"] // n_heads
    fields = dict(
        d_model=v["hidden_size"], d_head=d_head, n_heads=n_heads, d_mlp=v["intermediate_size"],
        n_layers=v["num_hidden_layers"], n_ctx=v["max_position_embeddings"],
        d_vocab=v["vocab_size"], act_fn=v["hidden_act"],
        initializer_range=v["initializer_range"], positional_embedding_type="rotary",
        trust_remote_code=True, rotary_base=_rotary_base(v), use_attn_scale=True,
    )  # fmt: skip
    if not phi3:
        factor = v.get("partial_rotary_factor") or rope_parameters(v)["partial_rotary_factor"]
        return fields | dict(
            eps=v["layer_norm_eps"], normalization_type="LN", parallel_attn_mlp=True,
            rotary_dim=round(factor * d_head),
        )  # fmt: skip
    n_kv = v.get("num_key_value_heads") or n_heads
    return fields | dict(
        eps=v["rms_norm_eps"], normalization_type="RMS", gated_mlp=True,
        parallel_attn_mlp=False, rotary_dim=d_head,
        n_key_value_heads=None if n_kv == n_heads else n_kv,
    )  # fmt: skip


def _bloom(v: dict[str, Any], named: bool) -> dict[str, Any]:
    """TL's BLOOM branch: n_ctx 2048 (BLOOM has no position table), gelu_fast, ALiBi."""
    return dict(
        d_model=v["hidden_size"], d_head=v["hidden_size"] // v["n_head"], n_heads=v["n_head"],
        d_mlp=4 * v["hidden_size"], n_layers=v["n_layer"], n_ctx=2048,
        d_vocab=v["vocab_size"], act_fn="gelu_fast", eps=v["layer_norm_epsilon"],
        normalization_type="LN", post_embedding_ln=True, positional_embedding_type="alibi",
        default_prepend_bos=False,
    )  # fmt: skip


_ARCHITECTURES = {
    "GPT2LMHeadModel": _gpt2,
    "GPTNeoXForCausalLM": _neox,
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _mistral,
    "MixtralForCausalLM": _mixtral,
    "Qwen2ForCausalLM": _qwen,
    "Qwen3ForCausalLM": lambda v, named: _qwen(v, named, qwen3=True),
    "Gemma2ForCausalLM": _gemma,
    "Gemma3ForCausalLM": lambda v, named: _gemma(v, named, gemma3=True),
    "GPTNeoForCausalLM": _gpt_neo,
    "OPTForCausalLM": _opt,
    "GPTJForCausalLM": _gptj,
    "PhiForCausalLM": _phi,
    "Phi3ForCausalLM": lambda v, named: _phi(v, named, phi3=True),
    "BloomForCausalLM": _bloom,
}


def repo_file(repo_id: str, filename: str) -> Path:
    """A file of a hub repo: downloaded once, then read from the Hugging Face cache (also when
    the hub cannot be reached, or HF_HUB_OFFLINE=1)."""
    import huggingface_hub

    try:
        return Path(huggingface_hub.hf_hub_download(repo_id, filename))
    except Exception as online_error:  # offline, no network, or a hub outage
        try:
            return Path(huggingface_hub.hf_hub_download(repo_id, filename, local_files_only=True))
        except Exception:
            raise FileNotFoundError(
                f"{filename} of {repo_id!r} is not in the Hugging Face cache "
                f"({huggingface_hub.constants.HF_HUB_CACHE}) and the hub could not be reached "
                f"({type(online_error).__name__}). Connect once to download it, point HF_HOME "
                "at a cache that has it, or pass a local folder."
            ) from None


def _config_values(model_name: str) -> tuple[str, dict[str, Any]]:
    """(official name or the folder's path, config.json's values) of a folder or TL name."""
    if (Path(model_name) / "config.json").is_file():
        return model_name, read_config_json(Path(model_name) / "config.json")
    official = get_official_model_name(model_name)
    return official, read_config_json(repo_file(official, "config.json"))


def convert_neel_model_config(official_model_name: str, **kwargs: Any) -> dict[str, Any]:
    """TL's config dict of a toy model (``NeelNanda/...``, a TL name or a local folder),
    from its TransformerLens-format config.json (``kwargs``: TL's download options, unused)."""
    official, values = _config_values(official_model_name)
    return neel_config_dict(values, official)


def convert_hf_model_config(model_name: str, **kwargs: Any) -> dict[str, Any]:
    """TL's config dict of a Hugging Face model (a TL name or a local folder), from its
    config.json, as TL 2.18's ``convert_hf_model_config``."""
    official, values = _config_values(model_name)
    architectures = values.get("architectures") or []
    architecture = architectures[0] if architectures else None
    text_architecture = architecture
    if architecture == "Gemma3ForConditionalGeneration":  # Gemma 3 4B+: its text model
        text_architecture, values = "Gemma3ForCausalLM", values.get("text_config") or {}
    if text_architecture not in _ARCHITECTURES:
        raise NotImplementedError(
            f"{architecture} is not currently supported (the config.json of "
            f"{printable(official)}); interp reads {sorted(_ARCHITECTURES)}."
        )
    values = _HF_DEFAULTS.get(text_architecture, {}) | {
        key: value for key, value in values.items() if value is not None
    }
    named = not (Path(model_name) / "config.json").is_file()
    try:
        fields = _ARCHITECTURES[text_architecture](values, named)
    except KeyError as error:
        raise ValueError(
            f"The config.json of {printable(official)} ({architecture}) has no field {error}."
        ) from None
    short_name = official.split("/")[-1]
    for prefix, n_ctx in _TL_NAMED_N_CTX.items():
        if named and short_name.startswith(prefix):
            fields["n_ctx"] = n_ctx
    return fields | dict(original_architecture=architecture, tokenizer_name=official)


def get_pretrained_model_config(
    model_name: str,
    hf_cfg: dict[str, Any] | None = None,
    checkpoint_index: int | None = None,
    checkpoint_value: int | None = None,
    fold_ln: bool = False,
    device: str | torch.device | None = None,
    n_devices: int = 1,
    default_prepend_bos: bool | None = None,
    dtype: torch.dtype = torch.float32,
    first_n_layers: int | None = None,
    n_ctx: int | None = None,
    **kwargs: Any,
) -> HookedTransformerConfig:
    """The HookedTransformerConfig TL 2.18 builds for ``model_name`` (a TL name or alias, or a
    local folder with a config.json), with TL's arguments: ``fold_ln`` makes the norms
    LNPre/RMSPre (not for shortformer models), ``first_n_layers`` and ``n_ctx`` override the
    config's (a longer ``n_ctx`` than the model's logs a warning), ``hf_cfg`` (a loaded HF
    model's config dict) gives the vocabulary size.

    Example:
        >>> import tempfile, transformers
        >>> folder = Path(tempfile.mkdtemp())   # or a name: "gpt2" (in the Hugging Face cache)
        >>> transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2,
        ...                         architectures=["GPT2LMHeadModel"]).save_pretrained(folder)
        >>> get_pretrained_model_config(str(folder), fold_ln=True).normalization_type
        'LNPre'
    """
    if checkpoint_index is not None or checkpoint_value is not None:
        raise ValueError(
            f"get_pretrained_model_config(checkpoint_index={checkpoint_index!r}, "
            f"checkpoint_value={checkpoint_value!r}): training checkpoints are not supported; "
            "load the checkpoint's folder instead."
        )
    official, values = _config_values(model_name)
    if is_transformer_lens_config(values) or is_transformer_lens_repo(official):
        cfg_dict = neel_config_dict(values, official)
    else:
        cfg_dict = convert_hf_model_config(model_name)
    cfg_dict["model_name"] = official.split("/")[-1]
    cfg_dict["init_weights"] = False
    # TL's default for GPT-2-style initialisation (its config's rule; unused: nothing is
    # initialised when weights are loaded).
    cfg_dict.setdefault("initializer_range", 0.8 / math.sqrt(cfg_dict["d_model"]))
    if cfg_dict.get("positional_embedding_type") == "shortformer" and fold_ln:
        logger.warning(
            "You tried to specify fold_ln=True for a shortformer model, but this can't be done! "
            "Setting fold_ln=False instead."
        )
        fold_ln = False
    cfg_dict["dtype"] = dtype
    if fold_ln:
        if cfg_dict["normalization_type"] in ("LN", "LNPre"):
            cfg_dict["normalization_type"] = "LNPre"
        elif cfg_dict["normalization_type"] in ("RMS", "RMSPre"):
            cfg_dict["normalization_type"] = "RMSPre"
        else:
            logger.warning("Cannot fold in layer norm, normalization_type is not LN.")
    cfg_dict["from_checkpoint"] = False
    cfg_dict["device"] = str(device) if device is not None else get_device()
    cfg_dict["n_devices"] = n_devices
    if default_prepend_bos is not None:
        cfg_dict["default_prepend_bos"] = default_prepend_bos
    cfg_dict.setdefault("default_prepend_bos", True)
    if hf_cfg is not None:
        quantization = hf_cfg.get("quantization_config") or {}
        cfg_dict["load_in_4bit"] = quantization.get("load_in_4bit", False)
        cfg_dict["d_vocab"] = hf_cfg.get("vocab_size", cfg_dict["d_vocab"])
        if cfg_dict["original_architecture"] == "Qwen2ForCausalLM":
            cfg_dict["rotary_base"] = hf_cfg.get("rope_theta", cfg_dict["rotary_base"])
    if first_n_layers is not None:
        cfg_dict["n_layers"] = first_n_layers
    if cfg_dict.get("attn_types"):  # TL's may be longer (Gemma 2's); one a layer is read
        cfg_dict["attn_types"] = cfg_dict["attn_types"][: cfg_dict["n_layers"]]
    if n_ctx is not None:
        if cfg_dict.get("n_ctx") is not None and n_ctx > cfg_dict["n_ctx"]:
            logger.warning(
                f"You are setting n_ctx={n_ctx} which is larger than this model's default "
                f"context length of {cfg_dict['n_ctx']}. The model was not trained on sequences "
                "this long and may produce unreliable results. Ensure you have sufficient "
                "memory for this context length."
            )
        cfg_dict["n_ctx"] = n_ctx
    return HookedTransformerConfig.from_dict(cfg_dict)
