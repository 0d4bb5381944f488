"""Time one attribution graph with interp.circuits and, when its Python is given, with
circuit-tracer 0.5.0, on the same random weights and transcoders (a Llama-shaped model,
per-layer skip transcoders in circuit-tracer's folder format), each in a fresh process:
best-of-N wall time, the process's peak memory (peak RSS) and its growth during
attribution (peak RSS minus RSS before), side by side and as ratios, and the largest
difference of the two adjacency matrices.

The default shape is the issue's: a Llama-shaped 6 layers x 512 wide, 8,192-feature
transcoders (about ``--active`` of them active a token and layer), a 64-token prompt, CPU.

    python3 benchmarks/bench_circuits.py                                  # interp only
    python3 benchmarks/bench_circuits.py --circuit-tracer /work/ct-venv/bin/python
    python3 benchmarks/bench_circuits.py --smoke                          # tiny, seconds

circuit-tracer's environment: see tests/circuit_tracer_reference/make_fixtures.py (the
default, /work/ct-venv/bin/python, is skipped with a message when absent).

Context sweep: ``--sweep 256,512,1024,2048,4096`` runs, at each prompt length, interp with
a dense graph, interp with a sparse one (``--sparse-threshold``, default 0: every nonzero
edge, the same graph) and circuit-tracer, each in a fresh process whose address space is
capped at ``--memory-limit-gib`` (an allocation past it is reported as out of memory, and
circuit-tracer is not run at longer prompts); ``--largest N`` doubles the prompt from N
tokens with sparse mode until it runs out of the cap.

    python3 benchmarks/bench_circuits.py --sweep 256,512,1024,2048,4096 --layers 4 \
        --d-model 64 --features 512 --active 2 --max-feature-nodes 512 --batch-size 64

Measured so (one thread, 8 GiB cap, on the project's shared 2-core CPU; peak RSS, growth
during attribution in brackets):

    tokens  nodes   interp dense         interp sparse        circuit-tracer
       256   1,802    2.1 s   306 (+55)    1.7 s   301 (+51)   13.0 s    747 (+292)
       512   3,082    3.1 s   353 (+97)    3.7 s   345 (+89)   31.9 s  1,496 (+1,039)
     1,024   5,642    6.8 s   467 (+191)   5.5 s   438 (+162) 122.1 s  4,384 (+3,921)
     2,048  10,762   21.2 s   930 (+630)  22.1 s   678 (+379)  out of memory (8 GiB)
     4,096  21,002   57.0 s 2,648 (+2,189) 50.3 s 1,336 (+876)  not run

Ratios to circuit-tracer at 1,024 tokens: time 0.05 (sparse) / 0.06 (dense), peak RSS
0.10 / 0.11, growth 0.04 / 0.05. Sparse / dense peak: 0.98 at 256 tokens, 0.73 at 2,048,
0.50 at 4,096 (the dense matrix is nodes^2: 1.7 GiB at 21,002 nodes; the sparse one holds
1.06M edges). circuit-tracer's memory grows with the square of the prompt from its batched
forward (``batch_size`` copies of every attention pattern). What still grows with the
square in sparse mode is the frozen attention patterns, ``[n_heads, pos, pos]`` a layer,
which the backward pass reads (0.5 GiB here at 4,096 tokens; 26 layers x 8 heads, as in
Gemma 2 2B, would be 13 GiB at 4,096 tokens).

The largest graph, ``--largest 8192`` at that shape and cap: sparse mode traced 8,192
tokens (67,819 active features, 41,482 nodes, 1.73M edges; 136 s, peak 4,448 MiB, +3,424
MiB), where the dense graph ran out of the 8 GiB (its matrix alone is 6.4 GiB); 16,384
tokens ran out of it. On a 24 GiB machine: the growth is quadratic in the prompt (the
attention patterns), +3.4 GiB at 8,192 tokens giving about +13.7 GiB at 16,384, so about
16k tokens of this model fit in 24 GiB and 32k do not (extrapolated: this machine's 23 GiB
are shared, and were not filled to check it).

Measured at the default shape (6,076 active features; one thread on the project's 2-core
CPU): interp 16.1 s, memory growth 553 MiB, peak RSS 1,233 MiB; circuit-tracer 104.5 s,
1,830 MiB, 2,470 MiB. Time 0.15x, memory growth 0.30x, peak RSS 0.50x; adjacency within
1.1e-6 of the largest entry. On 2 threads: 10.7 s vs 51.3 s, 0.21x. At 4x256, 2,048
features, 32 tokens (best of 3): 0.47 s vs 4.27 s, 0.11x; memory growth 0.20x. (Before the
backward pass was written out, autograd through the frozen forward, batched by vmap, took
0.92x circuit-tracer's time here.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "circuit_tracer_reference"
# Never d_model: circuit-tracer 0.5.0 guesses W_U's orientation from which axis has d_vocab
# entries (targets.py, _compute_logit_vecs), so a square W_U gives it the rows, not the
# columns, as logit directions (with d_vocab = d_model = 512 its graph was 0.39 off ours).
VOCAB = 1000
PEER_PYTHON = Path("/work/ct-venv/bin/python")  # circuit-tracer 0.5.0's environment

# Runs in a fresh process: argv = side, folder, repeats, batch_size, fixtures, max nodes;
# env BENCH_SPARSE (interp's sparse_threshold), BENCH_LIMIT (address-space cap, bytes: an
# allocation past it fails as out of memory), BENCH_SAVE (write the adjacency matrix).
RUNNER = r"""
import json, os, resource, sys, time
from pathlib import Path
limit = int(os.environ.get("BENCH_LIMIT", "0"))
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import torch
side, folder, repeats, batch = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
max_nodes = int(sys.argv[6]) or None
sparse = os.environ.get("BENCH_SPARSE")
options = {} if side != "interp" or not sparse else {"sparse_threshold": float(sparse)}
cfg = json.loads((folder / "config.json").read_text())
tokens = torch.tensor(json.loads((folder / "tokens.json").read_text()))
from safetensors.torch import load_file
state = load_file(folder / "model.safetensors")
if side == "interp":
    from interp import HookedTransformer, HookedTransformerConfig
    from interp.circuits import ReplacementModel, attribute, load_transcoders
    model = HookedTransformer(HookedTransformerConfig(**cfg))
    model.load_state_dict(state, strict=False)
    model = ReplacementModel.from_model(model, load_transcoders(folder / "tc"))
else:
    sys.path.insert(0, sys.argv[5])
    import make_fixtures
    from circuit_tracer import attribute
    from circuit_tracer.utils.caching import load_transcoders_from_cache
    tcs, _ = load_transcoders_from_cache("tc", cache_dir=folder, device=torch.device("cpu"),
                                         lazy_decoder=False)
    model = make_fixtures.replacement_model(cfg, state, tcs)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
best = float("inf")
try:
    for _ in range(repeats):
        start = time.perf_counter()
        graph = attribute(tokens, model, batch_size=batch, max_feature_nodes=max_nodes, **options)
        best = min(best, time.perf_counter() - start)
except (MemoryError, RuntimeError) as error:  # past BENCH_LIMIT: torch's allocator refuses
    if "memory" not in str(error).lower() and not isinstance(error, MemoryError):
        raise
    print(json.dumps({"oom": str(error)[:200]}))
    sys.exit(0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
matrix = graph.adjacency_matrix
if os.environ.get("BENCH_SAVE"):
    torch.save(matrix, folder / f"{side}.pt")
edges = matrix._nnz() if matrix.layout != torch.strided else int(torch.count_nonzero(matrix))
print(json.dumps({"seconds": best, "growth_mib": (peak - before) / 1024, "peak_mib": peak / 1024,
                  "features": len(graph.active_features), "nodes": matrix.shape[0],
                  "edges": edges}))
"""


def write_inputs(folder: Path, args: argparse.Namespace) -> None:
    """Random Llama-shaped weights (TransformerLens layout) and skip transcoders reading
    ``mlp.hook_in`` and writing ``mlp.hook_out``, in circuit-tracer's folder format."""
    from interp import HookedTransformer, HookedTransformerConfig
    from interp.circuits import TranscoderSet
    from interp.sae import SAE, SAEConfig

    d, heads = args.d_model, max(2, args.d_model // 64)
    cfg = dict(
        n_layers=args.layers, d_model=d, n_heads=heads, d_head=d // heads, d_mlp=4 * d,
        d_vocab=VOCAB, n_ctx=max(64, args.tokens), act_fn="silu", normalization_type="RMS",
        positional_embedding_type="rotary", rotary_dim=d // heads, gated_mlp=True,
        n_key_value_heads=heads // 2, final_rms=True,
    )  # fmt: skip
    (folder / "config.json").write_text(json.dumps(cfg))
    torch.manual_seed(0)
    model = HookedTransformer(HookedTransformerConfig(**cfg))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".w"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif param.ndim > 1 and "W_E" not in name:
                param.normal_(0, d**-0.5)
    save_file({k: v.contiguous() for k, v in model.state_dict().items() if "." in k and
               not k.endswith(("IGNORE", "mask"))}, str(folder / "model.safetensors"))  # fmt: skip
    saes = []
    for layer in range(args.layers):
        sae = SAE(SAEConfig(
            d_in=d, d_sae=args.features, architecture="jumprelu_skip_transcoder",
            hook_name=f"blocks.{layer}.mlp.hook_in", hook_name_out=f"blocks.{layer}.mlp.hook_out",
            apply_b_dec_to_input=False,
        ))  # fmt: skip
        with torch.no_grad():  # pre-activations ~ N(b_enc, 1): about args.active pass 0.3
            sae.W_enc.normal_(0, 1.0 / d**0.5)
            sae.b_enc.fill_(0.3 - statistics.NormalDist().inv_cdf(1 - args.active / args.features))
            sae.threshold.fill_(0.3)
            sae.W_dec.normal_(0, 0.02)
            sae.W_skip.normal_(0, 0.02)
        saes.append(sae)
    TranscoderSet.from_saes(saes, scan="bench").save(folder / "tc")
    tokens = [0, *(1 + i % (VOCAB - 1) for i in range(args.tokens - 1))]
    (folder / "tokens.json").write_text(json.dumps(tokens))


def run_side(
    side: str,
    python: str,
    folder: Path,
    args: argparse.Namespace,
    sparse: float | None = None,
    limit_bytes: int = 0,
    save: bool = True,
) -> dict:
    """One attribution in a fresh process: its JSON line (``{"oom": ...}`` when it ran out
    of the ``limit_bytes`` address space)."""
    argv = [python, "-c", RUNNER, side, str(folder), str(args.repeats), str(args.batch_size)]
    argv += [str(FIXTURES), str(args.max_feature_nodes or 0)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "BENCH_LIMIT": str(limit_bytes)}
    # Large blocks from mmap, returned when freed: the peak RSS follows the live tensors.
    env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    env["BENCH_SPARSE"] = "" if sparse is None else repr(sparse)
    env["BENCH_SAVE"] = "1" if save else ""
    if side == "interp":  # this checkout's interp, whatever is installed
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cwd = ROOT if side == "interp" else folder  # circuit-tracer away from interp/tokenizers.py
    out = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, check=False)
    if out.returncode != 0:
        if limit_bytes and ("memory" in out.stderr.lower() or out.returncode < 0):
            return {"oom": f"exit {out.returncode}: {out.stderr.strip()[-200:]}"}
        raise RuntimeError(f"{side} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--features", type=int, default=8192)
    parser.add_argument("--active", type=float, default=16, help="active features a token, layer")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--max-feature-nodes", type=int, help="attribute's (default: all)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--circuit-tracer", metavar="PYTHON", default=str(PEER_PYTHON),
        help=f"a Python with circuit-tracer installed (default {PEER_PYTHON}, skipped when "
        "absent; 'none': interp only)",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, one repeat")
    parser.add_argument("--sweep", metavar="TOKENS", help="context sweep, e.g. 256,1024,4096")
    parser.add_argument("--largest", type=int, metavar="TOKENS", help="double from TOKENS "
                        "with sparse mode until it runs out of --memory-limit-gib")  # fmt: skip
    parser.add_argument("--sparse-threshold", type=float, default=0.0, help="sweep's sparse")
    parser.add_argument("--memory-limit-gib", type=float, default=8.0, help="sweep's cap")
    args = parser.parse_args(argv)
    if args.circuit_tracer == "none":
        args.circuit_tracer = None
    elif not Path(args.circuit_tracer).exists():
        print(f"circuit-tracer skipped: no Python at {args.circuit_tracer}", file=sys.stderr)
        args.circuit_tracer = None
    if args.smoke:
        args.layers, args.d_model, args.features, args.tokens, args.repeats = 2, 64, 256, 8, 1
        args.active = 3.0
    return args


def _cell(result: dict | None) -> str:
    if result is None:
        return "-"
    if "oom" in result:
        return "out of memory"
    growth = f"{result['growth_mib']:+,.0f}"
    return f"{result['seconds']:.1f} s, peak {result['peak_mib']:,.0f} MiB ({growth})"


def _ratio(ours: dict | None, theirs: dict | None, key: str) -> str:
    if not ours or not theirs or "oom" in ours or "oom" in theirs:
        return "-"
    return f"{ours[key] / theirs[key]:.2f}"


def sweep(args: argparse.Namespace, sizes: list[int]) -> list[dict]:
    """interp dense, interp sparse and circuit-tracer (when given) at each prompt length,
    each in a fresh process capped at ``--memory-limit-gib``; circuit-tracer is not run
    past the first length it ran out of memory at."""
    limit = int(args.memory_limit_gib * 2**30)
    rows, peer_failed = [], False
    for n in sizes:
        args.tokens = n
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            write_inputs(folder, args)
            row = {"tokens": n}
            row["dense"] = run_side("interp", sys.executable, folder, args, None, limit, False)
            sparse = args.sparse_threshold
            row["sparse"] = run_side("interp", sys.executable, folder, args, sparse, limit, False)
            if args.circuit_tracer and not peer_failed:
                theirs = run_side("circuit_tracer", args.circuit_tracer, folder, args, None, limit)
                row["circuit_tracer"], peer_failed = theirs, "oom" in theirs
        rows.append(row)
        print(_sweep_line(row), flush=True)
    return rows


def _sweep_line(row: dict) -> str:
    dense, sparse, peer = row["dense"], row["sparse"], row.get("circuit_tracer")
    shape = sparse if "oom" not in sparse else dense
    counts = "" if "oom" in shape else f"{shape['features']:,} active, {shape['nodes']:,} nodes"
    edges = "" if "oom" in sparse else f", {sparse['edges']:,} edges kept"
    return (
        f"{row['tokens']:>6} tokens ({counts}{edges}) | dense {_cell(dense)} | sparse "
        f"{_cell(sparse)} | circuit-tracer {_cell(peer)} | sparse/ct time "
        f"{_ratio(sparse, peer, 'seconds')} peak {_ratio(sparse, peer, 'peak_mib')} | "
        f"dense/ct time {_ratio(dense, peer, 'seconds')} peak {_ratio(dense, peer, 'peak_mib')}"
        f" | sparse/dense peak {_ratio(sparse, dense, 'peak_mib')}"
    )


def largest(args: argparse.Namespace, start: int) -> None:
    """The longest prompt (doubling from ``start``) sparse mode traces within the cap."""
    limit, n, best = int(args.memory_limit_gib * 2**30), start, None
    while True:
        args.tokens = n
        with tempfile.TemporaryDirectory() as tmp:
            write_inputs(Path(tmp), args)
            sparse = args.sparse_threshold
            result = run_side("interp", sys.executable, Path(tmp), args, sparse, limit, False)
        print(f"{n} tokens: {_cell(result)}", flush=True)
        if "oom" in result:
            break
        best, n = (n, result), 2 * n
    if best is None:
        print(f"nothing traced within {args.memory_limit_gib} GiB from {start} tokens")
    else:
        print(f"largest traced within {args.memory_limit_gib} GiB: {best[0]} tokens, "
              f"{best[1]['nodes']:,} nodes, {best[1]['edges']:,} edges")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    if args.sweep or args.largest:
        print(f"shape: {args.layers}x{args.d_model}, {args.features} features, ~{args.active} "
              f"active a token and layer, max_feature_nodes={args.max_feature_nodes}, batch "
              f"{args.batch_size}, cap {args.memory_limit_gib} GiB, sparse_threshold="
              f"{args.sparse_threshold}; {args.threads} thread(s)")  # fmt: skip
        if args.sweep:
            sweep(args, [int(n) for n in args.sweep.split(",")])
        if args.largest:
            largest(args, args.largest)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_inputs(folder, args)
        shape = f"{args.layers}x{args.d_model}, {args.features} features, {args.tokens} tokens"
        ours = run_side("interp", sys.executable, folder, args)
        print(f"shape: {shape}; {ours['features']} active features; {args.threads} thread(s)")
        print(f"interp: {ours['seconds']:.3f} s, memory growth {ours['growth_mib']:.0f} MiB, "
              f"peak RSS {ours['peak_mib']:.0f} MiB")  # fmt: skip
        if args.circuit_tracer:
            theirs = run_side("circuit_tracer", args.circuit_tracer, folder, args)
            a, b = torch.load(folder / "interp.pt"), torch.load(folder / "circuit_tracer.pt")
            diff = ((a - b).abs().max() / b.abs().max()).item()
            print(f"circuit-tracer: {theirs['seconds']:.3f} s, memory growth "
                  f"{theirs['growth_mib']:.0f} MiB, "
                  f"peak RSS {theirs['peak_mib']:.0f} MiB")  # fmt: skip
            if theirs["features"] != ours["features"]:
                print(f"active features differ: circuit-tracer {theirs['features']}")
            print(f"time interp / circuit-tracer: {ours['seconds'] / theirs['seconds']:.3f}")
            print(f"memory growth interp / circuit-tracer: "
                  f"{ours['growth_mib'] / max(theirs['growth_mib'], 1e-9):.3f}")  # fmt: skip
            print(f"peak RSS interp / circuit-tracer: {ours['peak_mib'] / theirs['peak_mib']:.3f}")
            print(f"max |A_interp - A_circuit_tracer| / max |A|: {diff:.2e}")


if __name__ == "__main__":
    main()
