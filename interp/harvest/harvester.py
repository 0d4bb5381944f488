"""``harvest``: a model's activations at chosen hooks over a whole dataset, into resumable
shards, on one process or many (``torchrun``).

The token stream is cut into sequences, and sequences into shards of a fixed number of
sequences; shard ``i`` holds sequences ``[i * S, (i + 1) * S)`` and runs as its own batches,
so its bytes depend on nothing but the model, the data and the settings. Each rank writes the
shards it owns (``i % world_size == rank``) and skips complete ones; rank 0 merges the
statistics in shard order and writes ``manifest.json``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from interp.harvest import data as data_module
from interp.harvest import tensor_parallel as tp_module
from interp.harvest.distributed import Ranks, default_device, init_ranks
from interp.harvest.shards import (
    FORMAT,
    MANIFEST,
    check_output_folder,
    complete_shard,
    config_hash,
    read_manifest,
    read_shard_stats,
    remove_temporary_files,
    shard_info,
    write_manifest,
)
from interp.harvest.stats import RunningStats
from interp.harvest.writer import ShardWriter
from interp.model import HookedTransformer
from interp.utils.dtypes import parse_dtype

DEFAULT_SHARD_TOKENS = 1 << 17
# The names --dtype takes (interp.utils.dtypes reads them), and the dtypes they are.
DTYPES = {
    name: parse_dtype(name) for name in ("fp32", "float32", "fp16", "float16", "bf16", "bfloat16")
}
# Hooks whose activations are not one vector a token.
_NOT_PER_TOKEN = ("hook_pattern", "hook_attn_scores")


def parse_positions(spec: str | slice | None) -> slice:
    """``--positions`` as a slice of each sequence's positions: ``"1:"`` drops the first (BOS),
    ``":-1"`` the last, ``"5"`` keeps position 5 only; None keeps all.

    Example:
        >>> parse_positions("1:")
        slice(1, None, None)
    """
    if spec is None or isinstance(spec, slice):
        return spec or slice(None)
    parts = spec.split(":")
    try:
        values = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        values = []
    if not 1 <= len(parts) <= 3 or not values:
        raise ValueError(
            f"--positions {spec!r} is not a position or a slice; give e.g. '1:' (drop BOS), "
            "'0:64' or '-1'."
        )
    if len(values) == 1:
        index = values[0]
        return slice(index, None if index == -1 else index + 1)
    return slice(*values)


def stored_dtype(name: str | torch.dtype | None, model: HookedTransformer) -> torch.dtype:
    """The dtype activations are stored in: ``name`` (``--dtype``: a float name, or any
    ``torch.dtype`` given from Python), else the model's."""
    if name is None:
        return model.cfg.dtype
    allowed = None if isinstance(name, torch.dtype) else tuple(dict.fromkeys(DTYPES.values()))
    return parse_dtype(name, "--dtype", allowed=allowed)


def parse_hooks(hooks: str | Sequence[str], model: HookedTransformer) -> list[str]:
    """Hook names from a comma-separated string or a list; unknown names are a ``KeyError``
    naming the closest valid ones."""
    names = [h.strip() for h in hooks.split(",")] if isinstance(hooks, str) else list(hooks)
    names = [h for h in names if h]
    if not names:
        raise ValueError("No hooks given; pass e.g. --hooks blocks.0.hook_resid_post.")
    if len(set(names)) != len(names):
        raise ValueError(f"--hooks names a hook twice: {names}.")
    for name in names:
        model.check_hook_name(name)
        if name.endswith(_NOT_PER_TOKEN):
            raise ValueError(
                f"{name} is [batch, head, query, key], not one vector a token; harvest "
                "per-token hooks (hook_resid_*, hook_*_out, mlp.hook_post, attn.hook_z, ...)."
            )
    return names


def weights_hash(model: HookedTransformer) -> str:
    """sha256 of every parameter and buffer's name, dtype, shape and bytes, in order."""
    digest = hashlib.sha256()
    for name, tensor in itertools.chain(model.named_parameters(), model.named_buffers()):
        tensor = tensor.detach().contiguous().cpu()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _model_config_hash(model: HookedTransformer) -> str:
    """sha256 of the model's config, less where it runs (device), which the output ignores."""
    config = {k: str(v) for k, v in model.cfg.to_dict().items() if k not in ("device", "n_devices")}
    return config_hash(config)


def _load_model(model: str | HookedTransformer, ranks: Ranks) -> tuple[HookedTransformer, str]:
    if isinstance(model, HookedTransformer):
        return model, model.cfg.model_name
    from interp.shipped.by_name import load_named_model

    loaded = load_named_model(model)
    return loaded.to(default_device(ranks)), model


def _shards(
    blocks: Iterator[np.ndarray], rows_per_shard: int, max_rows: int | None
) -> Iterator[tuple[int, np.ndarray]]:
    """(index, rows) for each shard of ``rows_per_shard`` sequences; the last may be short."""
    pending: list[np.ndarray] = []
    n_pending = 0
    n_seen = 0
    index = 0
    for block in blocks:
        if max_rows is not None:
            block = block[: max_rows - n_seen]
        n_seen += len(block)
        pending.append(block)
        n_pending += len(block)
        while n_pending >= rows_per_shard:
            rows = np.concatenate(pending)
            yield index, rows[:rows_per_shard]
            index += 1
            pending, n_pending = [rows[rows_per_shard:]], n_pending - rows_per_shard
        if max_rows is not None and n_seen >= max_rows:
            break
    if n_pending:
        yield index, np.concatenate(pending)


def _probe_shapes(
    model: HookedTransformer, first_row: np.ndarray, hooks: list[str]
) -> dict[str, list[int]]:
    """Each hook's per-token shape, from a forward on one sequence."""
    tokens = torch.as_tensor(first_row[None], device=model.device)
    with torch.inference_mode():
        _, cache = model.run_with_cache(tokens, names_filter=hooks, return_type=None)
    shapes = {}
    for hook in hooks:
        shape = tuple(cache[hook].shape)
        if shape[:2] != tuple(tokens.shape):
            raise ValueError(
                f"{hook} gives activations of shape {list(shape)} for tokens "
                f"{list(tokens.shape)}, not one vector a token; harvest per-token hooks."
            )
        shapes[hook] = list(shape[2:]) or [1]
    return shapes


def _check_tokens(rows: np.ndarray, d_vocab: int) -> None:
    if rows.size and (rows.min() < 0 or rows.max() >= d_vocab):
        bad = int(rows.max()) if rows.max() >= d_vocab else int(rows.min())
        raise ValueError(
            f"Token id {bad} is outside the model's vocabulary (0..{d_vocab - 1}); pre-tokenised "
            "data must come from this model's tokenizer."
        )


def harvest(
    model: str | HookedTransformer,
    data: str | Path,
    hooks: str | Sequence[str],
    out: str | Path,
    *,
    seq_len: int | None = None,
    batch_size: int = 8,
    max_tokens: int | None = None,
    dtype: str | torch.dtype | None = None,
    positions: str | slice | None = None,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    text_field: str = "text",
    progress: bool = True,
) -> dict[str, Any]:
    """Harvest ``hooks``' activations over ``data`` into shards under ``out``; returns the
    manifest (also ``out/manifest.json``).

    ``model`` is a model or a name (shipped, checkpoint folder, hub id). ``data`` is a file
    or folder (text, JSON lines, Parquet, a ``datasets`` folder, or token ids). Sequences are
    ``seq_len`` tokens (default: the token arrays' width, else ``n_ctx``), ``batch_size`` a
    forward; ``max_tokens`` caps the tokens read (whole sequences); ``positions`` keeps part
    of each sequence (``"1:"`` drops BOS); ``dtype`` stores bf16/fp16/fp32 (default: the
    model's); a shard holds about ``shard_tokens`` stored vectors. The same call on a
    killed run's folder resumes it; under ``torchrun`` the ranks share the shards. A
    tensor-parallel model (called on every rank) is harvested in sharded mode, each rank
    writing its heads' and neurons' columns (``interp.harvest.tensor_parallel``).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "input.txt").write_text("To be, or not to be. " * 20)
        >>> manifest = harvest("shakespeare-char", folder / "input.txt", "blocks.1.hook_resid_post",
        ...                    folder / "acts", seq_len=64, max_tokens=256, progress=False)
        >>> manifest["n_tokens"], manifest["status"]   # 4 whole sequences of 64
        (256, 'complete')
        >>> manifest["statistics"]["blocks.1.hook_resid_post"]["mean_norm"] > 0
        True
    """
    tensor_parallel = getattr(model, "tp", None) is not None  # sharded mode: every rank writes
    ranks = tp_module.tp_ranks(model) if tensor_parallel else init_ranks()
    try:
        return _harvest(
            ranks,
            model,
            data,
            hooks,
            Path(out),
            seq_len,
            batch_size,
            max_tokens,
            dtype,
            positions,
            shard_tokens,
            text_field,
            progress,
        )
    finally:
        ranks.close()


@dataclass
class _Plan:
    """What a harvest reads and writes, every input checked (``_plan``): the model and its
    hooks, the data's sequences, and the shapes of what is kept of them."""

    model: HookedTransformer
    model_source: Any
    hook_names: list[str]
    dtype: torch.dtype
    sources: list[Any]
    seq_len: int
    position_slice: slice
    kept: int  # positions kept a sequence
    max_rows: int | None  # sequences to harvest (None: all)
    tokenizer: Any
    add_bos: bool
    blocks: Iterator[np.ndarray]  # the data's sequences, in blocks [rows, seq_len]
    shapes: dict[str, Any]  # hook -> the shape of one position's activation
    widths: dict[str, int]  # hook -> the values a position stores
    rows_per_shard: int


def _harvest(
    ranks: Ranks,
    model_or_name: str | HookedTransformer,
    data: str | Path,
    hooks: str | Sequence[str],
    out: Path,
    seq_len: int | None,
    batch_size: int,
    max_tokens: int | None,
    dtype_name: str | torch.dtype | None,
    positions_spec: str | slice | None,
    shard_tokens: int,
    text_field: str,
    progress: bool,
) -> dict[str, Any]:
    plan = _plan(
        ranks,
        model_or_name,
        data,
        hooks,
        seq_len,
        batch_size,
        max_tokens,
        dtype_name,
        positions_spec,
        shard_tokens,
        text_field,
    )
    identity = _claim_output_folder(ranks, out, plan, text_field, batch_size, max_tokens)
    n_shards = _write_shards(ranks, out, plan, batch_size, progress)
    manifest = None
    if ranks.is_main:
        manifest = _finish(out, identity, n_shards, plan.hook_names)
    ranks.barrier()
    return ranks.broadcast(manifest)


def _plan(
    ranks: Ranks,
    model_or_name: str | HookedTransformer,
    data: str | Path,
    hooks: str | Sequence[str],
    seq_len: int | None,
    batch_size: int,
    max_tokens: int | None,
    dtype_name: str | torch.dtype | None,
    positions_spec: str | slice | None,
    shard_tokens: int,
    text_field: str,
) -> _Plan:
    """Every check before anything is written: the model, hooks, dtype, sizes, data and
    positions, with a clear error for each."""
    model, model_source = _load_model(model_or_name, ranks)
    model.eval()
    hook_names = parse_hooks(hooks, model)
    dtype = stored_dtype(dtype_name, model)
    if batch_size < 1 or shard_tokens < 1:
        raise ValueError(
            f"batch_size ({batch_size}) and shard_tokens ({shard_tokens}) must be >= 1."
        )
    sources = data_module.find_sources(data)
    if not sources:
        raise ValueError(
            f"--data {str(data)!r} holds no file harvest can read (text, JSON "
            "lines, Parquet, datasets folder, .npy/.pt/.safetensors token ids)."
        )
    if seq_len is None:
        widths = {data_module.token_width(s) for s in sources if data_module.is_tokenised(s)}
        seq_len = widths.pop() if len(widths) == 1 and None not in widths else model.cfg.n_ctx
    if not 1 <= seq_len <= model.cfg.n_ctx:
        raise ValueError(
            f"seq_len={seq_len} is not between 1 and the model's n_ctx ({model.cfg.n_ctx}); "
            f"pass --seq-len {model.cfg.n_ctx} or less."
        )
    position_slice = parse_positions(positions_spec)
    kept = len(range(seq_len)[position_slice])
    if kept == 0:
        raise ValueError(
            f"--positions {positions_spec!r} keeps no position of a {seq_len}-token sequence."
        )
    max_rows = None if max_tokens is None else max_tokens // seq_len
    if max_rows == 0:
        raise ValueError(f"max_tokens={max_tokens} is less than one sequence ({seq_len} tokens).")
    tokenizer = model.tokenizer
    if tokenizer is None and not all(data_module.is_tokenised(s) for s in sources):
        raise ValueError("This model has no tokenizer; give pre-tokenised data (.npy/.pt).")
    add_bos = bool(
        model.cfg.default_prepend_bos and getattr(tokenizer, "bos_token_id", None) is not None
    )
    blocks = data_module.sequences(sources, tokenizer, seq_len, add_bos, text_field)
    first = next((b for b in blocks if len(b)), None)
    if first is None:
        raise ValueError(
            f"--data {str(data)!r} holds no complete sequence of {seq_len} tokens (it is empty "
            "or too short); give more data or a smaller --seq-len."
        )
    _check_tokens(first, model.cfg.d_vocab)
    blocks = itertools.chain([first], blocks)
    shapes = _probe_shapes(model, first[0], hook_names)
    widths = {hook: math.prod(shape) for hook, shape in shapes.items()}
    rows_per_shard = max(1, shard_tokens // kept)
    return _Plan(
        model,
        model_source,
        hook_names,
        dtype,
        sources,
        seq_len,
        position_slice,
        kept,
        max_rows,
        tokenizer,
        add_bos,
        blocks,
        shapes,
        widths,
        rows_per_shard,
    )


def _claim_output_folder(
    ranks: Ranks,
    out: Path,
    plan: _Plan,
    text_field: str,
    batch_size: int,
    max_tokens: int | None,
) -> dict[str, Any] | None:
    """The output folder: rank 0 decides (refusing a folder that holds another harvest) and
    writes the in-progress manifest, every rank obeys. Returns the harvest's identity (the
    manifest's, on rank 0; None on the others)."""
    identity = None
    refusal = None
    weights = _weights_sha256(ranks, plan.model)
    if ranks.is_main:
        identity = {
            "model": {
                "name": plan.model.cfg.model_name,
                "source": str(plan.model_source),
                "config_sha256": _model_config_hash(plan.model),
                "weights_sha256": weights,
            },
            "tokenizer": data_module.tokenizer_identity(plan.tokenizer) if plan.tokenizer else None,
            "data": [s.identity() for s in plan.sources],
            "text_field": text_field,
            "hooks": {
                hook: {"shape": plan.shapes[hook], "d": plan.widths[hook]}
                for hook in plan.hook_names
            },
            "dtype": str(plan.dtype).removeprefix("torch."),
            "seq_len": plan.seq_len,
            "prepend_bos": plan.add_bos,
            "positions": [
                plan.position_slice.start,
                plan.position_slice.stop,
                plan.position_slice.step,
            ],
            "tokens_per_sequence": plan.kept,
            "sequences_per_shard": plan.rows_per_shard,
            "tokens_per_shard": plan.rows_per_shard * plan.kept,
            "batch_size": batch_size,
            "max_tokens": max_tokens,
        }
        if isinstance(ranks, tp_module.TPRanks):  # where each split hook's columns are
            split = tp_module.split_hooks(plan.model, plan.shapes)
            identity["tensor_parallel"] = {
                "tp_size": ranks.tp_size,
                "hooks": {hook: layout.to_json() for hook, layout in split.items()},
            }
        refusal = check_output_folder(out, identity)
        if refusal is None:
            out.mkdir(parents=True, exist_ok=True)
            remove_temporary_files(out)
            existing = read_manifest(out)
            if existing is None or existing.get("status") != "complete":
                write_manifest(out, _manifest(identity, "in_progress"))
    refusal = ranks.broadcast(refusal)
    if refusal is not None:
        raise FileExistsError(refusal)
    ranks.barrier()
    return identity


def _weights_sha256(ranks: Ranks, model: HookedTransformer) -> str | None:
    """``weights_hash`` of the model on rank 0 (None elsewhere); of a tensor-parallel model,
    the hash of its ranks' shards' hashes (every rank computes its own)."""
    if not isinstance(ranks, tp_module.TPRanks):
        return weights_hash(model) if ranks.is_main else None
    hashes: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(hashes, (ranks.dp_rank, ranks.tp_rank, weights_hash(model)))
    copy_0 = sorted(entry for entry in hashes if entry[0] == 0)
    return config_hash({"tensor_parallel_shards": [entry[2] for entry in copy_0]})


def _write_shards(ranks: Ranks, out: Path, plan: _Plan, batch_size: int, progress: bool) -> int:
    """This rank's shards (those not already complete), written as they are harvested;
    returns the number of shards of the whole harvest."""
    if isinstance(ranks, tp_module.TPRanks):
        shards = _shards(plan.blocks, plan.rows_per_shard, plan.max_rows)
        return tp_module.write_shards(ranks, out, plan, batch_size, shards)
    on_gpu = plan.model.device.type == "cuda"
    writer = ShardWriter(
        out, plan.widths, plan.rows_per_shard * plan.kept, plan.dtype, pinned=on_gpu
    )
    total = None
    if plan.max_rows is not None:
        n_shards = math.ceil(plan.max_rows / plan.rows_per_shard)
        mine = [i for i in range(n_shards) if ranks.owns(i)]
        total = (
            sum(min(plan.rows_per_shard, plan.max_rows - i * plan.rows_per_shard) for i in mine)
            * plan.kept
        )
    bar = tqdm(
        total=total,
        unit="tok",
        unit_scale=True,
        disable=not (progress and ranks.is_main),
        desc=f"harvest rank {ranks.rank}/{ranks.world_size}" if ranks.world_size > 1 else "harvest",
    )
    n_shards = 0
    try:
        for index, rows in _shards(plan.blocks, plan.rows_per_shard, plan.max_rows):
            n_shards = index + 1
            if not ranks.owns(index) or complete_shard(out, index) is not None:
                continue
            _check_tokens(rows, plan.model.cfg.d_vocab)
            buffers = writer.buffers()
            stats = _run_shard(
                plan.model,
                rows,
                plan.hook_names,
                plan.position_slice,
                batch_size,
                buffers,
                plan.dtype,
                bar,
            )
            info = shard_info(index, plan.rows_per_shard, len(rows), plan.kept)
            writer.submit(index, buffers, len(rows) * plan.kept, stats, info)
    finally:
        writer.close()
        bar.close()
    ranks.barrier()
    return n_shards


def _run_shard(
    model: HookedTransformer,
    rows: np.ndarray,
    hooks: list[str],
    positions: slice,
    batch_size: int,
    buffers: Any,
    dtype: torch.dtype,
    bar: tqdm,
) -> dict[str, RunningStats]:
    """Forward the shard's sequences ``batch_size`` at a time (stopping at the deepest hook),
    copy the kept positions into ``buffers`` and return the shard's statistics."""
    stats: dict[str, RunningStats] = {}
    offset = 0
    for start in range(0, len(rows), batch_size):
        tokens = torch.as_tensor(rows[start : start + batch_size], device=model.device)
        with torch.inference_mode():
            _, cache = model.run_with_cache(tokens, names_filter=hooks, return_type=None)
            kept_ids = tokens[:, positions].reshape(-1).to(torch.int32)
            n = kept_ids.shape[0]
            for hook in hooks:
                vectors = cache[hook][:, positions].reshape(n, -1).to(dtype)
                batch_stats = RunningStats.of(vectors)
                stats[hook] = stats[hook].merge(batch_stats) if hook in stats else batch_stats
                buffers.activations[hook][offset : offset + n].copy_(vectors, non_blocking=True)
            buffers.token_ids[offset : offset + n].copy_(kept_ids, non_blocking=True)
        offset += n
        bar.update(n)
    return stats


def _manifest(identity: dict[str, Any], status: str, **fields: Any) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "status": status,
        "config_hash": config_hash(identity),
        "config": identity,
        **fields,
    }


def _finish(out: Path, identity: dict[str, Any], n_shards: int, hooks: list[str]) -> dict:
    """Check every shard is there, merge the statistics in shard order, write the manifest."""
    records = []
    merged: dict[str, RunningStats] = {}
    for index in range(n_shards):
        record = complete_shard(out, index, verify=False)
        if record is None:
            raise RuntimeError(
                f"Shard {index} is missing from {out} after the harvest (did a rank fail?); run "
                "the same command again to redo it."
            )
        shard = read_shard_stats(out, index, hooks)
        if "tensor_parallel" in identity:  # its parts, and the whole vectors' statistics
            split = {
                hook: tp_module.SplitHook(tuple(map(tuple, s["columns"])), tuple(s["owners"]))
                for hook, s in identity["tensor_parallel"]["hooks"].items()
            }
            record, shard = tp_module.finish_records(out, index, record, shard, split)
        records.append(record)
        for hook, shard_stats in shard.items():
            merged[hook] = merged[hook].merge(shard_stats) if hook in merged else shard_stats
    manifest = _manifest(
        identity,
        "complete",
        n_shards=n_shards,
        n_sequences=sum(r["n_sequences"] for r in records),
        n_tokens=sum(r["n_tokens"] for r in records),
        shards=records,
        statistics={hook: stats.summary() for hook, stats in merged.items()},
    )
    write_manifest(out, manifest)
    return manifest


__all__ = ["harvest", "MANIFEST"]
