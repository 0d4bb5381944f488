"""gpt-oss's experts kept in MXFP4 against dequantized at load: the model's resident bytes,
the peak memory of a forward, and the forward's time, as ratios (kept / dequantized), and
whether the logits are bit-equal.

Writes a random gpt-oss-shaped checkpoint whose experts are MXFP4 as the published ones
(``*_blocks``/``*_scales``, ``quantization_config.quant_method: "mxfp4"``), then measures
each way in a fresh process: on CUDA ``torch.cuda.max_memory_allocated`` over the forward
(model included); on the CPU the peak resident memory (VmHWM, reset through
``/proc/self/clear_refs`` after loading) over a forward, in a process whose freed tensors
go back to the kernel (one thread, one malloc arena, a fixed mmap threshold, as
``loading_memory.py``), plus the resident memory of the loaded model. Loaded in bf16.

    python benchmarks/bench_mxfp4.py                  # 8 layers of 16 experts of 1024 x 1024
    python benchmarks/bench_mxfp4.py --smoke          # tiny, seconds
    python benchmarks/bench_mxfp4.py --device cuda
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

MEASURE = """
import json, sys, time, torch
torch.set_num_threads(1)
import interp
from interp.components.mxfp4_experts import quantized_bytes
folder, device, how, n_tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
model = interp.HookedTransformer.from_pretrained_no_processing(
    folder, tokenizer=None, dtype=torch.bfloat16, device=device,
    dequantize_experts=how == "dequantized")
tokens = torch.randint(0, model.cfg.d_vocab, (1, n_tokens),
                       generator=torch.Generator().manual_seed(0)).to(device)
resident = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
with torch.no_grad():
    model(tokens)  # warm-up: one-time allocations are not the forward's
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        open("/proc/self/clear_refs", "w").write("5")  # resets VmHWM to VmRSS
        before = status("VmRSS")
    start = time.perf_counter()
    logits = model(tokens)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if device.startswith("cuda") else status("VmHWM")
torch.save(logits.cpu(), folder + "/logits-" + how + ".pt")
print(json.dumps(dict(resident=resident, experts=quantized_bytes(model), before=before,
                      peak=peak, seconds=seconds)))
"""


def write_checkpoint(folder: Path, smoke: bool) -> None:
    """A random gpt-oss checkpoint with MXFP4 experts: 8 layers of 16 experts of 1024 x 1024
    (2 of 4 of 64 x 64 with ``smoke``); random blocks, scales around 2 ** -7."""
    import transformers
    from safetensors.torch import save_file

    width, layers, experts = (64, 2, 4) if smoke else (1024, 8, 16)
    config = transformers.GptOssConfig(
        num_hidden_layers=layers,
        num_local_experts=experts,
        num_experts_per_tok=4 if not smoke else 2,
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
    with torch.device("meta"):  # the experts are written below; the rest small
        skeleton = transformers.GptOssForCausalLM(config)
    tensors, generator = {}, torch.Generator().manual_seed(0)
    for name, param in skeleton.state_dict().items():
        if name.endswith(("gate_up_proj", "down_proj")):
            n, columns, rows = param.shape
            shape = (n, rows, columns // 32, 16)
            tensors[name + "_blocks"] = torch.randint(0, 256, shape, generator=generator).to(
                torch.uint8
            )
            scales = torch.randint(118, 122, shape[:-1], generator=generator)
            tensors[name + "_scales"] = scales.to(torch.uint8)
        else:
            tensors[name] = torch.randn(param.shape, generator=generator) * 0.02
    del skeleton
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    values = config.to_dict() | dict(architectures=["GptOssForCausalLM"])
    values["quantization_config"] = dict(quant_method="mxfp4", modules_to_not_convert=[])
    (folder / "config.json").write_text(json.dumps(values))


def measure(folder: Path, device: str, how: str, n_tokens: int) -> dict[str, float]:
    """One way's figures, in a fresh process."""
    environment = os.environ | {
        "OMP_NUM_THREADS": "1",
        "MALLOC_ARENA_MAX": "1",
        "MALLOC_MMAP_THRESHOLD_": "131072",
    }
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), device, how, str(n_tokens)],
        capture_output=True,
        text=True,
        env=environment,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench_mxfp4 ({how}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, seconds")
    parser.add_argument("--tokens", type=int, default=None, help="prompt length")
    args = parser.parse_args(argv)
    n_tokens = args.tokens or (16 if args.smoke else 256)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "gpt-oss-mxfp4"
        write_checkpoint(folder, args.smoke)
        kept = measure(folder, args.device, "kept", n_tokens)
        dequantized = measure(folder, args.device, "dequantized", n_tokens)
        same = torch.equal(
            torch.load(folder / "logits-kept.pt"), torch.load(folder / "logits-dequantized.pt")
        )
    forward = {  # the forward's own rise (CPU) or its peak with the model (CUDA)
        name: figures["peak"] - (0 if args.device.startswith("cuda") else figures["before"])
        for name, figures in (("kept", kept), ("dequantized", dequantized))
    }
    total = {
        "kept": kept["resident"] + forward["kept"],
        "dequantized": dequantized["resident"] + forward["dequantized"],
    }
    what = (
        "peak of a forward (model included)"
        if args.device.startswith("cuda")
        else "peak rise of a forward over the loaded model"
    )
    lines = [
        f"MXFP4 experts kept against dequantized at load ({args.device}, bf16, "
        f"{'smoke' if args.smoke else '8 layers x 16 experts of 1024 x 1024'}, {n_tokens} "
        "tokens):",
        f"  resident bytes of the model: {kept['resident'] / 2**20:.1f} MiB against "
        f"{dequantized['resident'] / 2**20:.1f} MiB = "
        f"{kept['resident'] / dequantized['resident']:.2f}x (the experts' MXFP4: "
        f"{kept['experts'] / 2**20:.1f} MiB)",
        f"  {what}: {forward['kept'] / 2**20:.1f} MiB against "
        f"{forward['dequantized'] / 2**20:.1f} MiB = "
        f"{forward['kept'] / max(forward['dequantized'], 1):.2f}x",
        *(
            []
            if args.device.startswith("cuda")
            else [
                f"  the model plus that peak: {total['kept'] / 2**20:.1f} MiB against "
                f"{total['dequantized'] / 2**20:.1f} MiB = "
                f"{total['kept'] / total['dequantized']:.2f}x"
            ]
        ),
        f"  forward time: {kept['seconds'] * 1e3:.1f} ms against "
        f"{dequantized['seconds'] * 1e3:.1f} ms = {kept['seconds'] / dequantized['seconds']:.2f}x",
        f"  logits {'bit-equal' if same else 'DIFFER'}",
    ]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
    main()
