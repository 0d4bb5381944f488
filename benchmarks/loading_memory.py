"""Peak memory of loading a GPT-2-small-shaped checkpoint, as a multiple of the model's size.

Writes a random-weight Hugging Face GPT-2 folder (config.json + model.safetensors), then in
fresh processes measures the rise of peak resident memory (VmHWM) over the resident memory
just before loading, for interp's ``from_pretrained`` and for two peers: the naive load
(build the model, ``safetensors.torch.load_file``, ``load_state_dict``), which is what
TransformerLens issue #252 measures at 2x, and ``transformers``' own ``from_pretrained``
(whose parameters stay memory-mapped on the file, resident only once touched, so its figure
counts what a load allocates, not what the model will occupy).

    python benchmarks/loading_memory.py            # GPT-2 small (124M parameters, ~0.5 GB)
    python benchmarks/loading_memory.py --smoke    # a tiny model, seconds
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from interp.config import preset_config
from interp.loading.hf import hf_shapes

MEASURE = """
import json, sys, torch
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
folder, warm_up_folder, how = sys.argv[1], sys.argv[2], sys.argv[3]
import interp, safetensors.torch
from interp.loading.hf import config_from_hf, convert_hf_state_dict
if how == "transformers":
    import transformers
def load(folder):
    if how == "interp":
        return interp.HookedTransformer.from_pretrained_no_processing(folder)
    if how == "naive":
        cfg = config_from_hf(json.load(open(folder + "/config.json")))
        model = interp.HookedTransformer(cfg, tokenizer="gpt2")
        model.load_state_dict(convert_hf_state_dict(
            safetensors.torch.load_file(folder + "/model.safetensors"), cfg))
        return model
    return transformers.GPT2LMHeadModel.from_pretrained(folder)
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


def measure(folder: Path, warm_up_folder: Path, how: str) -> dict[str, float]:
    """Peak resident-memory rise of loading ``folder`` one way, in a fresh process that has
    loaded the small ``warm_up_folder`` the same way first."""
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), str(warm_up_folder), how],
        capture_output=True,
        text=True,
        check=True,
    )
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    figures["ratio"] = figures["peak_rise"] / figures["model_bytes"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny model, for CI")
    args = parser.parse_args()
    tiny = preset_config("gpt2", n_layers=1, d_model=64, n_heads=4, d_vocab=1000, n_ctx=64)
    cfg = preset_config("gpt2", d_vocab=5000, n_layers=2) if args.smoke else preset_config("gpt2")
    with tempfile.TemporaryDirectory() as tmp:
        folder, warm_up_folder = Path(tmp) / "model", Path(tmp) / "warm-up"
        for path, shape in ((folder, cfg), (warm_up_folder, tiny)):
            path.mkdir()
            write_checkpoint(path, shape)
        ways = ["interp", "naive", "transformers"]
        results = {how: measure(folder, warm_up_folder, how) for how in ways}
    interp_ratio = results["interp"]["ratio"]
    for how, figures in results.items():
        print(
            f"{how:>13}: peak rise {figures['peak_rise'] / 2**20:7.1f} MiB = "
            f"{figures['ratio']:.2f}x the model ({figures['model_bytes'] / 2**20:.1f} MiB); "
            f"{figures['ratio'] / interp_ratio:.2f}x interp's"
        )


if __name__ == "__main__":
    main()
