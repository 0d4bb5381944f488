"""TransformerLens 2.18's model names, its configs from config.json files and its toy models.

Writes into tests/tl218_reference/api/:

- ``names.json``: TL's ``OFFICIAL_MODEL_NAMES`` and ``MODEL_ALIASES``.
- ``hf_configs/<family>/config.json``: tiny Hugging Face configs (transformers 4.57's classes),
  and ``configs.json``: what ``get_pretrained_model_config`` returns for each, read from a
  local folder and from the hub cache under an official name (offline).
- ``toy/<name>/``: tiny random TransformerLens toy models laid out as their hub repos are (a
  TL-format ``config.json`` and ``model_final.pth``), shrunk from the real ones' shapes, and
  ``toy_outputs.safetensors``: TL's logits and cache for them through ``from_pretrained``
  (TL's default processing) and ``from_pretrained_no_processing``, plus ``toy.json``: their
  configs and hook names.

TL 2.18 lists a NeelNanda repo's files with the hub API, which needs a network; here that one
call lists the cached snapshot instead. Every other step (hf_hub_download from the cache,
AutoConfig, torch.load) runs as it does for a user with HF_HUB_OFFLINE=1.

Run from the repository root: /work/tl218-venv/bin/python tests/tl218_reference/make_api.py
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent / "api"
HUB = Path(tempfile.mkdtemp()) / "hub"
os.environ["HF_HUB_CACHE"] = os.environ["HUGGINGFACE_HUB_CACHE"] = str(HUB)  # before they are read
os.environ["HF_HUB_OFFLINE"] = "1"

import huggingface_hub  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformer_lens import HookedTransformer, HookedTransformerConfig  # noqa: E402
from transformer_lens import loading_from_pretrained as loading  # noqa: E402

COMMIT = "0" * 40
TOKENS = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))

# Tiny configs of each family TL reads from config.json (the hub name it is cached under). Folder
# names avoid "llama" and "gemma": TL 2.18 picks those architectures from the name alone.
HF_CONFIGS = {
    "gpt2": ("gpt2", transformers.GPT2Config(
        architectures=["GPT2LMHeadModel"], n_layer=2, n_embd=32, n_head=4, n_positions=64,
        n_ctx=64, vocab_size=100)),
    "neox": ("EleutherAI/pythia-70m", transformers.GPTNeoXConfig(
        architectures=["GPTNeoXForCausalLM"], hidden_size=32, num_attention_heads=4,
        num_hidden_layers=2, intermediate_size=64, max_position_embeddings=64, vocab_size=100,
        rotary_pct=0.5)),
    "meta": ("meta-llama/Llama-3.2-1B", transformers.LlamaConfig(
        architectures=["LlamaForCausalLM"], hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=64, vocab_size=100, rope_theta=500000.0, rms_norm_eps=1e-5)),
    "mistral": ("mistralai/Mistral-7B-v0.1", transformers.MistralConfig(
        architectures=["MistralForCausalLM"], hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=64, vocab_size=100, sliding_window=16)),
    "qwen2": ("Qwen/Qwen2-0.5B", transformers.Qwen2Config(
        architectures=["Qwen2ForCausalLM"], hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=64, vocab_size=100, rope_theta=1e6)),
    "qwen3": ("Qwen/Qwen3-0.6B", transformers.Qwen3Config(
        architectures=["Qwen3ForCausalLM"], hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=64, vocab_size=100)),
}  # fmt: skip

# The published config.json fields of models TL 2.18 configures by name alone (its per-name
# tables hold these values; it reads no file for them).
PUBLISHED_CONFIGS = {
    "meta-llama/Llama-3.2-1B": dict(
        architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, hidden_act="silu", max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling=dict(
            factor=32.0, high_freq_factor=4.0, low_freq_factor=1.0,
            original_max_position_embeddings=8192, rope_type="llama3"),
        tie_word_embeddings=True, vocab_size=128256, torch_dtype="bfloat16"),
    "google/gemma-2-2b": dict(
        architectures=["Gemma2ForCausalLM"], model_type="gemma2", hidden_size=2304,
        intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0,
        sliding_window=4096, query_pre_attn_scalar=256, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0, vocab_size=256000, initializer_range=0.02),
    "google/gemma-2-27b": dict(
        architectures=["Gemma2ForCausalLM"], model_type="gemma2", hidden_size=4608,
        intermediate_size=36864, num_hidden_layers=46, num_attention_heads=32,
        num_key_value_heads=16, head_dim=128, hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0,
        sliding_window=4096, query_pre_attn_scalar=144, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0, vocab_size=256000, initializer_range=0.02),
    "google/gemma-3-270m": dict(
        architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=640,
        intermediate_size=2048, num_hidden_layers=18, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
        rope_local_base_freq=10000.0, sliding_window=512, query_pre_attn_scalar=256,
        layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 3, vocab_size=262144,
        initializer_range=0.02),
    "google/gemma-3-4b-pt": dict(  # multimodal: the text model's config is nested
        architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3",
        text_config=dict(
            model_type="gemma3_text", hidden_size=2560, intermediate_size=10240,
            num_hidden_layers=34, num_attention_heads=8, num_key_value_heads=4, head_dim=256,
            hidden_activation="gelu_pytorch_tanh", max_position_embeddings=131072,
            rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
            rope_scaling=dict(factor=8.0, rope_type="linear"), sliding_window=1024,
            query_pre_attn_scalar=256, sliding_window_pattern=6, vocab_size=262208,
            initializer_range=0.02)),
}  # fmt: skip

# Toy models: (hub repo, TL-format config.json as the repos hold it, shrunk: d_model 512 -> 32,
# d_vocab 48262 -> 64, n_ctx 1024 -> 24; training fields TL ignores are kept).
_TRAINING = {"lr_hidden": 0.002, "batch_size_per_device": 32, "seed": 10, "n_devices": 8,
             "ln_eps": 1e-5, "dataset_name": "c4+code", "weight_init_scheme": "gpt2"}  # fmt: skip
TOY = {
    "attn-only-2l": ("NeelNanda/Attn_Only_2L512W_C4_Code", dict(
        n_layers=2, d_model=32, d_mlp=128, d_head=8, n_heads=4, n_ctx=24, d_vocab=64,
        act_fn="solu_ln", attn_only=True, normalization="LN", shortformer_pos=True)),
    "gelu-1l": ("NeelNanda/GELU_1L512W_C4_Code", dict(
        n_layers=1, d_model=32, d_mlp=128, d_head=8, n_heads=4, n_ctx=24, d_vocab=64,
        act_fn="gelu", attn_only=False, normalization="LN", shortformer_pos=False)),
    "solu-1l": ("NeelNanda/SoLU_1L512W_C4_Code", dict(
        n_layers=1, d_model=32, d_mlp=128, d_head=8, n_heads=4, n_ctx=24, d_vocab=64,
        act_fn="solu_ln", attn_only=False, normalization="LN", shortformer_pos=True)),
    "solu-1l-pile": ("NeelNanda/SoLU_1L_v9_old", dict(
        n_layers=1, d_model=32, d_mlp=128, d_head=8, n_heads=4, n_ctx=24, d_vocab=64,
        act_fn="solu_ln", attn_only=False, normalization="LN", shortformer_pos=False)),
    "solu-2l": ("NeelNanda/SoLU_2L512W_C4_Code", dict(
        n_layers=2, d_model=32, d_mlp=128, d_head=8, n_heads=4, n_ctx=24, d_vocab=64,
        act_fn="solu_ln", attn_only=False, normalization="LN", shortformer_pos=False)),
}  # fmt: skip


def cache_repo(repo: str, files: dict[str, Path]) -> Path:
    """Lay ``files`` out as the hub cache holds repo ``repo`` at commit COMMIT."""
    root = HUB / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / COMMIT
    snapshot.mkdir(parents=True, exist_ok=True)
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(COMMIT)
    for name, source in files.items():
        shutil.copy(source, snapshot / name)
    return snapshot


def list_cached_files(self, repo_id: str, **kwargs) -> list[str]:
    """HfApi.list_repo_files, from the cache (the one call that would need a network)."""
    snapshot = HUB / f"models--{repo_id.replace('/', '--')}" / "snapshots" / COMMIT
    return sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())


def old_solu_layout(state_dict: dict) -> dict:
    """A state dict as the old Pile SoLU checkpoints (up to 6 layers) store it: norms named
    "norm" (the final one "norm."), every W_ and W_pos transposed; TL's
    convert_neel_solu_old_weights undoes exactly this."""
    old = {}
    for key, value in state_dict.items():
        key = "ln." + key.removeprefix("ln_final.") if key.startswith("ln_final.") else key
        old[key.replace("ln", "norm")] = value.transpose(-2, -1) if "W_" in key else value
    return old


def jsonable(cfg: HookedTransformerConfig) -> dict:
    values = cfg.to_dict()
    values["dtype"] = str(values["dtype"]).removeprefix("torch.")
    values["device"] = str(values["device"])
    return values


def write_names() -> None:
    names = {"OFFICIAL_MODEL_NAMES": loading.OFFICIAL_MODEL_NAMES,
             "MODEL_ALIASES": loading.MODEL_ALIASES}  # fmt: skip
    (HERE / "names.json").write_text(json.dumps(names, indent=1) + "\n")


def write_hf_configs() -> None:
    """TL's configs of each tiny config.json: from its folder (relative path, as a script run
    from the repository root gives it) and from the hub cache under the official name."""
    results = {}
    for family, (official, config) in HF_CONFIGS.items():
        folder = HERE / "hf_configs" / family
        config.save_pretrained(folder)
        cache_repo(official, {"config.json": folder / "config.json"})
        local = os.path.relpath(folder)
        results[family] = {
            "official_name": official,
            "local_path": local,
            "from_folder": jsonable(loading.get_pretrained_model_config(local)),
            "from_cache": jsonable(loading.get_pretrained_model_config(official)),
            "from_cache_with_options": jsonable(loading.get_pretrained_model_config(
                official, fold_ln=True, n_ctx=32, default_prepend_bos=False,
                dtype=torch.bfloat16, first_n_layers=1)),
        }  # fmt: skip
    for official, values in PUBLISHED_CONFIGS.items():
        folder = HERE / "published" / official.replace("/", "--")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(values, indent=1) + "\n")
        results[official] = {
            "official_name": official,
            "published_config": os.path.relpath(folder / "config.json"),
            "by_name": jsonable(loading.get_pretrained_model_config(official)),
        }
    (HERE / "configs.json").write_text(json.dumps(results, indent=1) + "\n")


def write_toy_models() -> None:
    outputs, facts = {}, {}
    for name, (repo, values) in TOY.items():
        folder = HERE / "toy" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(values | _TRAINING, indent=1) + "\n")
        cache_repo(repo, {"config.json": folder / "config.json"})
        tl_cfg = loading.get_pretrained_model_config(repo)
        tl_cfg.init_weights = True
        torch.manual_seed(len(name))
        model = HookedTransformer(tl_cfg)
        with torch.no_grad():  # non-trivial norms and biases, so processing changes numbers
            for key, param in model.named_parameters():
                if key.endswith((".w", ".b", "b_Q", "b_K", "b_V", "b_O", "b_in", "b_out", "b_U")):
                    param.copy_(torch.randn_like(param) * 0.2 + key.endswith(".w"))
        state_dict = model.state_dict()
        if name.endswith("-pile"):  # the old SoLU models' layout, which TL converts on load
            state_dict = old_solu_layout(state_dict)
        torch.save(state_dict, folder / "model_final.pth")
        cache_repo(repo, {"model_final.pth": folder / "model_final.pth"})
        facts[name] = {"repo": repo, "config": jsonable(tl_cfg)}
        for mode, load in [("processed", HookedTransformer.from_pretrained),
                           ("raw", HookedTransformer.from_pretrained_no_processing)]:  # fmt: skip
            loaded = load(name, device="cpu").eval()
            with torch.no_grad():
                logits, cache = loaded.run_with_cache(TOKENS)
            outputs[f"{name}/{mode}/logits"] = logits
            for key, value in cache.items() if mode == "processed" else []:
                outputs[f"{name}/{mode}/cache/{key}"] = value
            facts[name][f"{mode}_hook_names"] = sorted(loaded.hook_dict)
            facts[name][f"{mode}_config"] = jsonable(loaded.cfg)
    outputs["tokens"] = TOKENS
    save_file(
        {k: v.contiguous().clone() for k, v in outputs.items()}, HERE / "toy_outputs.safetensors"
    )
    (HERE / "toy.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    assert importlib.metadata.version("transformer_lens") == "2.18.0"
    huggingface_hub.HfApi.list_repo_files = list_cached_files
    HERE.mkdir(exist_ok=True)
    write_names()
    write_hf_configs()
    write_toy_models()
    shutil.rmtree(HUB.parent)
    print("wrote", sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*") if p.is_file()),
          file=sys.stderr)  # fmt: skip
