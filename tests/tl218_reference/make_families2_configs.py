"""TransformerLens 2.18's configs of the second family group (GPT-Neo, OPT, GPT-J, Phi, Phi-3,
BLOOM) from tiny config.json files (transformers 4.57's classes), read from a local folder and
from the hub cache under an official name (offline), as ``make_api.py`` does for the first
families. Writes ``api/hf_configs2/<family>/config.json`` and ``api/families2_configs.json``.
Run from the repository root:
/work/tl218-venv/bin/python tests/tl218_reference/make_families2_configs.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from make_api import HERE, cache_repo, jsonable, loading, transformers  # noqa: E402

SMALL = dict(vocab_size=100)
HF_CONFIGS = {
    "gpt-neo": ("EleutherAI/gpt-neo-125M", transformers.GPTNeoConfig(
        architectures=["GPTNeoForCausalLM"], hidden_size=32, num_heads=4, num_layers=2,
        attention_types=[[["global", "local"], 1]], window_size=5, max_position_embeddings=64,
        **SMALL)),
    "opt": ("facebook/opt-125m", transformers.OPTConfig(
        architectures=["OPTForCausalLM"], hidden_size=32, num_attention_heads=4,
        num_hidden_layers=2, ffn_dim=64, max_position_embeddings=64, **SMALL)),
    "gptj": ("EleutherAI/gpt-j-6B", transformers.GPTJConfig(
        architectures=["GPTJForCausalLM"], n_embd=32, n_head=4, n_layer=2, rotary_dim=4,
        n_positions=64, **SMALL)),
    "phi": ("microsoft/phi-2", transformers.PhiConfig(
        architectures=["PhiForCausalLM"], hidden_size=40, num_attention_heads=4,
        num_hidden_layers=2, intermediate_size=64, max_position_embeddings=64,
        partial_rotary_factor=0.4, **SMALL)),
    "phi3": ("microsoft/Phi-3-mini-4k-instruct", transformers.Phi3Config(
        architectures=["Phi3ForCausalLM"], hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=64, pad_token_id=0, **SMALL)),
    "bloom": ("bigscience/bloom-560m", transformers.BloomConfig(
        architectures=["BloomForCausalLM"], hidden_size=32, n_head=4, n_layer=2, **SMALL)),
}  # fmt: skip


def main() -> None:
    results = {}
    for family, (official, config) in HF_CONFIGS.items():
        folder = HERE / "hf_configs2" / family
        config.save_pretrained(folder)
        cache_repo(official, {"config.json": folder / "config.json"})
        local = os.path.relpath(folder)
        results[family] = {
            "official_name": official,
            "local_path": local,
            "from_folder": jsonable(loading.get_pretrained_model_config(local)),
            "from_cache": jsonable(loading.get_pretrained_model_config(official)),
        }
    (HERE / "families2_configs.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
