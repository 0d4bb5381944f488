"""Large checkpoints stream: a multi-shard mixture-of-experts folder (safetensors, or
``torch.save`` shards) loads with its peak memory near one copy of the weights, and
``dtype=`` applies as each tensor is read (a float32 checkpoint loaded in bf16 peaks near
the bf16 model's size, half the checkpoint's). Measured in fresh processes by
benchmarks/loading_memory.py (the rise of peak resident memory over the memory before
loading, after a warm-up load), with bounds loose enough for any machine's allocator."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp import HookedTransformer

pytest.importorskip("transformers")


def benchmark_module():
    spec = importlib.util.spec_from_file_location(
        "loading_memory", Path(__file__).parents[2] / "benchmarks" / "loading_memory.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A gpt-oss-shaped checkpoint of about 30 MB in 6 safetensors shards (its largest
    tensor a layer's experts, 4 MB), the same as ``torch.save`` shards with their index,
    and a tiny warm-up folder."""
    import transformers

    benchmark = benchmark_module()
    root = tmp_path_factory.mktemp("streaming")
    config = transformers.GptOssConfig(
        num_hidden_layers=2,
        num_local_experts=8,
        num_experts_per_tok=2,
        vocab_size=8000,
        hidden_size=256,
        intermediate_size=256,
        head_dim=32,
        num_attention_heads=8,
        num_key_value_heads=2,
        sliding_window=8,
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    transformers.GptOssForCausalLM(config).save_pretrained(root / "st", max_shard_size="6MB")
    benchmark.write_moe_checkpoint(root / "warm-up", smoke=True)
    torch_folder = root / "bin"
    torch_folder.mkdir()
    (torch_folder / "config.json").write_text((root / "st" / "config.json").read_text())
    weight_map = {}
    for index, shard in enumerate(sorted((root / "st").glob("*.safetensors"))):
        name = f"pytorch_model-{index:05d}.bin"
        tensors = load_file(shard)
        torch.save(tensors, torch_folder / name)
        weight_map |= dict.fromkeys(tensors, name)
    index_path = torch_folder / "pytorch_model.bin.index.json"
    index_path.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return benchmark, root


def test_the_checkpoint_is_sharded_and_both_formats_load_alike(folders):
    _, root = folders
    assert len(list((root / "st").glob("*.safetensors"))) >= 4
    tokens = torch.arange(10)[None]
    with torch.no_grad():
        from_safetensors = HookedTransformer.from_pretrained_no_processing(root / "st")(tokens)
        from_torch = HookedTransformer.from_pretrained_no_processing(root / "bin")(tokens)
    assert torch.equal(from_safetensors, from_torch)


@pytest.mark.parametrize("weights", ["st", "bin"])
def test_peak_memory_stays_near_one_copy_of_the_weights(folders, weights):
    benchmark, root = folders
    figures = benchmark.measure(root / weights, root / "warm-up", "interp")
    # One copy of the weights is 1.0x; reading the whole checkpoint first (the naive load)
    # is 2x. The margin is the largest tensor in flight and the allocator's slack.
    assert figures["checkpoint_ratio"] < 1.5, figures


def test_dtype_applies_while_loading(folders):
    """float32 on disk, loaded in bf16: cast tensor by tensor, the peak stays well below the
    float32 checkpoint's size (casting after loading would need all of it and then half)."""
    benchmark, root = folders
    figures = benchmark.measure(root / "st", root / "warm-up", "interp", "bfloat16")
    assert figures["model_bytes"] * 2 == pytest.approx(figures["checkpoint_bytes"], rel=0.01)
    # About 0.77 here: the bf16 model (0.5) plus the largest float32 tensor in flight and the
    # allocator's slack; casting after loading would be 1.5.
    assert figures["checkpoint_ratio"] < 0.9, figures
