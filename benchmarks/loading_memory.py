"""Peak memory of loading a checkpoint, as a multiple of the model's and the checkpoint's size:
a GPT-2-small-shaped one and a multi-shard gpt-oss-shaped mixture of experts.

Writes random-weight Hugging Face folders (config.json + safetensors), then in fresh
processes (one thread, glibc's mmap threshold fixed so that freed tensors leave the
process) measures the rise of peak resident memory (VmHWM) over the resident memory just
before loading, for interp's ``from_pretrained`` and for two peers: the naive load (read
the whole checkpoint with ``safetensors.torch.load_file``, then build the model from it),
which is what TransformerLens issue #252 measures at 2x, and ``transformers``' own
``from_pretrained`` (whose parameters stay memory-mapped on the file, resident only once
touched, so its figure counts what a load allocates, not what the model will occupy).

The gpt-oss folder is saved with ``save_pretrained(max_shard_size=...)`` in several shards
(about 330 MB in float32, its largest tensor a layer's fused experts, 33 MB); interp reads
it one tensor at a time, converts it and lets it go, so the peak stays near one copy of the
weights; loaded with ``dtype=bfloat16`` each tensor is cast as it is read, so the peak is
near the bf16 model's size, half the checkpoint's.

    python benchmarks/loading_memory.py            # GPT-2 small (~0.5 GB) and gpt-oss (~330 MB)
    python benchmarks/loading_memory.py --smoke    # tiny models, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from interp.config import preset_config
from interp.loading.families.gpt2 import hf_shapes

MEASURE = """
import json, sys, torch
torch.set_num_threads(1)
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
folder, warm_up_folder, how = sys.argv[1], sys.argv[2], sys.argv[3]
dtype = getattr(torch, sys.argv[4]) if len(sys.argv) > 4 else None
import glob, interp, safetensors.torch
from interp.loading.checkpoint import TensorSource, build_model
from interp.loading.families import family_for, is_gpt2, iter_tensors
from interp.loading.families.gpt2 import config_from_hf, convert_hf_state_dict
if how == "transformers":
    import transformers
def load(folder):
    if how == "interp":
        return interp.HookedTransformer.from_pretrained_no_processing(
            folder, tokenizer=None, dtype=dtype)
    if how == "transformers":
        return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    # naive: the whole checkpoint in memory, then the model built from it
    config = json.load(open(folder + "/config.json"))
    state_dict = {}
    for path in sorted(glob.glob(folder + "/*.safetensors")):
        state_dict.update(safetensors.torch.load_file(path))
    if is_gpt2(config):
        cfg = config_from_hf(config)
        model = interp.HookedTransformer(cfg, tokenizer="gpt2")
        model.load_state_dict(convert_hf_state_dict(state_dict, cfg))
        return model
    family = family_for(config)
    cfg = family.hooked_config(config, **({"dtype": dtype} if dtype else {}))
    source = TensorSource.from_state_dict(state_dict)  # its own dict: state_dict stays alive
    source, rows = family.checked_source(source, cfg, config, "naive")
    return build_model(cfg, iter_tensors(source, rows), model_class=interp.HookedTransformer)
load(warm_up_folder)  # one-time costs (lazy imports, torch initialisation) are not counted
before = rss("VmRSS")
model = load(folder)
model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
print(json.dumps({"peak_rise": rss("VmHWM") - before, "model_bytes": model_bytes}))
"""


def write_checkpoint(folder: Path, cfg) -> None:
    """A random GPT-2 checkpoint in Hugging Face's layout, without building any model."""
    generator = torch.Generator().manual_seed(0)
    tensors = {
        "transformer." + name: torch.randn(shape, generator=generator) * 0.02
        for name, shape in hf_shapes(cfg).items()
    }
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    config = dict(
        model_type="gpt2",
        architectures=["GPT2LMHeadModel"],
        n_layer=cfg.n_layers,
        n_embd=cfg.d_model,
        n_head=cfg.n_heads,
        n_positions=cfg.n_ctx,
        vocab_size=cfg.d_vocab,
        activation_function="gelu_new",
    )
    (folder / "config.json").write_text(json.dumps(config))


def write_moe_checkpoint(folder: Path, smoke: bool = False, max_shard_size: str = "50MB") -> None:
    """A random gpt-oss-shaped checkpoint (``GptOssForCausalLM``, float32), saved by
    ``save_pretrained`` in shards of at most ``max_shard_size``: 6 layers of 16 experts of
    512 x 512 (about 330 MB), or 2 layers of 4 experts of 64 x 64 with ``smoke``."""
    import transformers

    width, layers, experts = (64, 2, 4) if smoke else (512, 6, 16)
    config = transformers.GptOssConfig(
        num_hidden_layers=layers,
        num_local_experts=experts,
        num_experts_per_tok=2,
        vocab_size=8000,
        hidden_size=width,
        intermediate_size=width,
        head_dim=64,
        num_attention_heads=8,
        num_key_value_heads=2,
        sliding_window=16,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    transformers.GptOssForCausalLM(config).save_pretrained(folder, max_shard_size=max_shard_size)


def checkpoint_bytes(folder: Path) -> int:
    """The size of a folder's weight files (``*.safetensors``, or ``torch.save``'s ``*.bin``)."""
    files = [*folder.glob("*.safetensors"), *folder.glob("*.bin")]
    return sum(path.stat().st_size for path in files)


def measure(
    folder: Path, warm_up_folder: Path, how: str, dtype: str | None = None
) -> dict[str, float]:
    """Peak resident-memory rise of loading ``folder`` one way (in ``dtype``, else the way's
    default), in a fresh process that has loaded the small ``warm_up_folder`` the same way
    first; with its ratio to the loaded model's and to the checkpoint's size."""
    # The measured process runs one thread, one malloc arena and a fixed mmap threshold, so
    # that every tensor is its own map, returned to the kernel when freed: its resident memory
    # then follows the live tensors. With glibc's defaults the freed tensors stay in a heap
    # whose fragmentation varied from run to run (the same load peaked at 0.75x or 0.95x the
    # checkpoint on a busy machine), which measured glibc, not the loader.
    environment = os.environ | {
        "OMP_NUM_THREADS": "1",
        "MALLOC_ARENA_MAX": "1",
        "MALLOC_MMAP_THRESHOLD_": "131072",
    }
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), str(warm_up_folder), how]
        + ([dtype] if dtype else []),
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    figures["checkpoint_bytes"] = checkpoint_bytes(folder)
    figures["ratio"] = figures["peak_rise"] / figures["model_bytes"]
    figures["checkpoint_ratio"] = figures["peak_rise"] / figures["checkpoint_bytes"]
    return figures


def report(title: str, results: dict[str, dict[str, float]]) -> None:
    print(title)
    interp_ratio = results["interp"]["ratio"]
    for how, figures in results.items():
        print(
            f"{how:>13}: peak rise {figures['peak_rise'] / 2**20:7.1f} MiB = "
            f"{figures['ratio']:.2f}x the model ({figures['model_bytes'] / 2**20:.1f} MiB), "
            f"{figures['checkpoint_ratio']:.2f}x the checkpoint "
            f"({figures['checkpoint_bytes'] / 2**20:.1f} MiB); "
            f"{figures['ratio'] / interp_ratio:.2f}x interp's"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny model, for CI")
    args = parser.parse_args()
    tiny = preset_config("gpt2", n_layers=1, d_model=64, n_heads=4, d_vocab=1000, n_ctx=64)
    cfg = preset_config("gpt2", d_vocab=5000, n_layers=2) if args.smoke else preset_config("gpt2")
    ways = ["interp", "naive", "transformers"]
    with tempfile.TemporaryDirectory() as tmp:
        folder, warm_up_folder = Path(tmp) / "model", Path(tmp) / "warm-up"
        for path, shape in ((folder, cfg), (warm_up_folder, tiny)):
            path.mkdir()
            write_checkpoint(path, shape)
        results = {how: measure(folder, warm_up_folder, how) for how in ways}
        report("GPT-2 (one safetensors file):", results)

        moe, moe_warm_up = Path(tmp) / "gpt-oss", Path(tmp) / "gpt-oss-warm-up"
        write_moe_checkpoint(moe, smoke=args.smoke, max_shard_size="4MB" if args.smoke else "50MB")
        write_moe_checkpoint(moe_warm_up, smoke=True)
        n_shards = len(list(moe.glob("*.safetensors")))
        results = {how: measure(moe, moe_warm_up, how) for how in ways}
        report(f"gpt-oss-shaped mixture of experts ({n_shards} shards), float32:", results)
        results = {how: measure(moe, moe_warm_up, how, "bfloat16") for how in ways}
        report("the same checkpoint loaded with dtype=bfloat16:", results)


if __name__ == "__main__":
    main()
