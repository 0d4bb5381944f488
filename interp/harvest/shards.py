"""The harvest folder on disk: shards, their statistics files and ``manifest.json``, each
written atomically (a temporary file, fsync, ``os.replace``), and checked on resume.

    out/manifest.json                  the run's identity; at the end its shards and statistics
    out/shard-00000.safetensors        one tensor per hook [tokens, d] and token_ids [tokens]
    out/shard-00000.stats.safetensors  that shard's float64 statistics and its sha256

A shard is complete when its statistics file exists and names the shard's sha256; anything
else (missing, truncated, corrupt, a leftover temporary file) is redone.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from safetensors.torch import load, save
from torch import Tensor

from interp.harvest.stats import RunningStats

MANIFEST = "manifest.json"
FORMAT = "interp-harvest/1"
TMP_MARK = ".tmp-"


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.safetensors"


def stats_name(index: int) -> str:
    return f"shard-{index:05d}.stats.safetensors"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader (or a resume after kill -9) sees either the
    old file or the whole new one: a temporary file beside it, fsync, rename, fsync the folder.
    """
    tmp = path.with_name(f"{path.name}{TMP_MARK}{os.getpid()}")
    with open(tmp, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def remove_temporary_files(out: Path) -> None:
    """Delete what a killed run left half-written."""
    for path in out.glob(f"*{TMP_MARK}*"):
        path.unlink(missing_ok=True)


def write_shard(
    out: Path,
    index: int,
    tensors: dict[str, Tensor],
    stats: dict[str, RunningStats],
    info: dict[str, int],
) -> str:
    """Write shard ``index`` (``tensors``: hook -> [tokens, d], ``token_ids``) and then its
    statistics file, which records the shard's sha256 and ``info``; returns the sha256."""
    data = save(tensors)
    digest = sha256_bytes(data)
    write_atomic(out / shard_name(index), data)
    stat_tensors = {}
    for hook, hook_stats in stats.items():
        stat_tensors.update(hook_stats.to_tensors(hook))
    # One metadata key: safetensors writes several in no fixed order, and the bytes must be.
    record = json.dumps({"sha256": digest, **info}, sort_keys=True)
    write_atomic(out / stats_name(index), save(stat_tensors, metadata={"record": record}))
    return digest


def complete_shard(out: Path, index: int, verify: bool = True) -> dict[str, Any] | None:
    """Shard ``index``'s record (sha256, bytes, info) if it is complete and (``verify``) its
    bytes match the sha256 its statistics file names; None when it must be (re)done."""
    shard, stats_file = out / shard_name(index), out / stats_name(index)
    if not shard.is_file() or not stats_file.is_file():
        return None
    try:
        record = json.loads(_safetensors_metadata(stats_file)["record"])
    except Exception:  # not a stats file this code wrote: redo the shard
        return None
    if verify and record.get("sha256") != sha256_file(shard):
        return None
    return {"file": shard.name, "bytes": shard.stat().st_size, **record}


def _safetensors_metadata(path: Path) -> dict[str, str]:
    with open(path, "rb") as file:
        header_len = int.from_bytes(file.read(8), "little")
        header = json.loads(file.read(header_len))
    return header.get("__metadata__", {})


def read_shard_stats(out: Path, index: int, hooks: list[str]) -> dict[str, RunningStats]:
    tensors = load((out / stats_name(index)).read_bytes())
    return {hook: RunningStats.from_tensors(tensors, hook) for hook in hooks}


# ---------------------------------------------------------------------------- manifest
def config_hash(identity: dict[str, Any]) -> str:
    return sha256_bytes(json.dumps(identity, sort_keys=True).encode("utf-8"))


def read_manifest(out: Path) -> dict[str, Any] | None:
    path = out / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path} is not valid JSON ({error}); this folder's harvest cannot be resumed. "
            "Choose another --out, or delete the folder."
        ) from error


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    write_atomic(out / MANIFEST, text.encode("utf-8"))


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    keys = sorted(set(old) | set(new))
    found = []
    for key in keys:
        a, b = old.get(key), new.get(key)
        if key == "hooks" and isinstance(a, dict) and isinstance(b, dict) and set(a) != set(b):
            a, b = list(a), list(b)  # name the hooks, not their shapes
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: {a!r} there, {b!r} now")
    return found


def check_output_folder(out: Path, identity: dict[str, Any]) -> str | None:
    """Why ``out`` may not take this harvest (None: it is new, empty, or this same harvest).

    A folder holding another harvest's manifest (another model, hooks, data or settings), or
    files that are not a harvest's, is refused; nothing in it is touched.
    """
    if not out.exists():
        return None
    if not out.is_dir():
        return f"--out {str(out)!r} is a file; give a folder."
    manifest = read_manifest(out)
    if manifest is None:
        others = [p.name for p in out.iterdir() if TMP_MARK not in p.name]
        if others:
            return (
                f"--out {str(out)!r} holds files ({', '.join(sorted(others)[:5])}) but no "
                f"{MANIFEST}; refusing to write a harvest into it. Choose an empty or new folder."
            )
        return None
    if manifest.get("format") != FORMAT or manifest.get("config_hash") != config_hash(identity):
        changes = _differences(manifest.get("config", {}), identity)
        return (
            f"--out {str(out)!r} holds another harvest ({'; '.join(changes[:6]) or 'format'}); "
            "refusing to overwrite it. Choose another --out, or delete that folder to start over."
        )
    return None


def shard_info(index: int, rows_per_shard: int, n_sequences: int, kept: int) -> dict[str, int]:
    """The manifest entry of shard ``index``: its first sequence, how many it holds and the
    tokens kept of them (``kept`` a sequence)."""
    return {
        "index": index,
        "first_sequence": index * rows_per_shard,
        "n_sequences": n_sequences,
        "n_tokens": n_sequences * kept,
    }
