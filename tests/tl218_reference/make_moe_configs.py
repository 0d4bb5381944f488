"""TransformerLens 2.18's config of a Mixtral (its only mixture-of-experts family besides
gpt-oss) from a tiny config.json (transformers 4.57's class), read from a local folder and
from the hub cache under its official name (offline), as ``make_families2_configs.py`` does.
Writes ``api/hf_configs_moe/mixtral/config.json`` and ``api/moe_configs.json``.
Run from the repository root:
/work/tl218-venv/bin/python tests/tl218_reference/make_moe_configs.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from make_api import HERE, cache_repo, jsonable, loading, transformers  # noqa: E402

HF_CONFIGS = {
    "mixtral": ("mistralai/Mixtral-8x7B-v0.1", transformers.MixtralConfig(
        architectures=["MixtralForCausalLM"], vocab_size=100, hidden_size=32,
        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=64, sliding_window=8)),
}  # fmt: skip


def main() -> None:
    results = {}
    for family, (official, config) in HF_CONFIGS.items():
        folder = HERE / "hf_configs_moe" / family
        config.save_pretrained(folder)
        cache_repo(official, {"config.json": folder / "config.json"})
        local = os.path.relpath(folder)
        results[family] = {
            "official_name": official,
            "local_path": local,
            "from_folder": jsonable(loading.get_pretrained_model_config(local)),
            "from_cache": jsonable(loading.get_pretrained_model_config(official)),
        }
    (HERE / "moe_configs.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
