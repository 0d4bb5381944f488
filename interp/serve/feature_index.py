"""An SAE's features over a dataset, computed once and kept on disk: each feature's top
contexts, density and activation histogram (``interp.sae.features.top_activations``, as
``interp features`` computes them), the tokens it promotes most, and its top contexts as text
to search.

The cache file is named by a hash of everything the numbers depend on: the model's weights
and config, the SAE's weights and config, the data file's bytes and the mining settings. A
second start with the same inputs reads the file; any change computes (and writes) anew.

Example:
    >>> import tempfile
    >>> chars = interp.load_model("shakespeare-char")
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> folder = Path(tempfile.mkdtemp())   # default cache_dir: ~/.cache/interp
    >>> _ = (folder / "input.txt").write_text("To be, or not to be, that is the question. " * 8)
    >>> index = FeatureIndex.build(chars, sae, folder / "input.txt", cache_dir=folder)
    >>> index.from_cache, index.stats.density.shape   # computed: [d_sae]
    (False, torch.Size([1024]))
    >>> FeatureIndex.build(chars, sae, folder / "input.txt", cache_dir=folder).from_cache
    True
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.components.tl_buffers import weights_state_dict

FORMAT = 2  # bump when what is stored changes
LOGIT_TOKENS = 10  # promoted and suppressed tokens kept per feature (search, feature pages)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/interp/features`` (``~/.cache/interp/features`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "interp" / "features"


def _hash_tensors(digest: Any, tensors: dict[str, Tensor]) -> None:
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())


def index_key(model: Any, sae: Any, data: bytes, settings: dict[str, Any]) -> str:
    """The hash naming a cache file: model and SAE weights and configs, data, settings."""
    digest = hashlib.sha256(f"interp feature index {FORMAT}".encode())
    _hash_tensors(digest, weights_state_dict(model))
    digest.update(repr(model.cfg).encode())
    _hash_tensors(digest, sae.state_dict())
    digest.update(repr(sae.cfg).encode())
    digest.update(hashlib.sha256(data).digest())
    digest.update(repr(sorted(settings.items())).encode())
    return digest.hexdigest()[:32]


@dataclass
class FeatureIndex:
    """``stats`` (a ``FeatureStats``); each feature's ``LOGIT_TOKENS`` most promoted and most
    suppressed tokens by logit weight (``feature_logit_weights``), ids [d_sae, LOGIT_TOKENS]
    and weights; the lower-cased text of its top contexts; where the index came from."""

    stats: Any
    promoted: Int[Tensor, "d_sae n"]
    promoted_weights: Float[Tensor, "d_sae n"]
    suppressed: Int[Tensor, "d_sae n"]
    suppressed_weights: Float[Tensor, "d_sae n"]
    context_text: list[str]
    data_name: str
    path: Path
    from_cache: bool

    @staticmethod
    def build(
        model: Any,
        sae: Any,
        data_path: str | Path,
        cache_dir: str | Path | None = None,
        k: int = 10,
        seq_len: int | None = None,
        max_tokens: int | None = None,
        batch_size: int = 32,
        progress: bool = False,
    ) -> FeatureIndex:
        """Read the index from ``cache_dir`` (default ``default_cache_dir()``) or compute it
        over the text file ``data_path`` (``.txt`` or ``.txt.gz``) and write it there.

        Args:
            model: the model the SAE reads.
            sae: the SAE whose features are indexed.
            data_path: the text the statistics are computed over.
            cache_dir: where index files are kept.
            k: the top contexts kept per feature.
            seq_len: the tokens in each context window (default: the model's ``n_ctx``).
            max_tokens: the most tokens used, in whole windows (default: all).
            batch_size: the windows in one forward pass.
            progress: whether a progress bar shows while it mines.
        """
        from interp.sae.features import (
            FeatureStats,
            text_windows,
            top_activations,
            top_logit_tokens,
        )

        data_path = Path(data_path)
        raw = data_path.read_bytes()
        settings = {"k": k, "seq_len": seq_len, "max_tokens": max_tokens}
        folder = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        path = folder / f"features-{index_key(model, sae, raw, settings)}.pt"
        if path.is_file():
            stored = torch.load(path, weights_only=True)
            stats = FeatureStats(**stored.pop("stats"))
            where = {"data_name": data_path.name, "path": path}
            return FeatureIndex(stats, **stored, **where, from_cache=True)
        text = (gzip.decompress(raw) if data_path.suffix == ".gz" else raw).decode("utf-8")
        windows = text_windows(model, text, seq_len)
        if max_tokens:
            windows = windows[: max(1, max_tokens // windows.shape[1])]
        stats = top_activations(model, sae, windows, k=k, batch_size=batch_size, progress=progress)
        up, down = top_logit_tokens(model, sae, k=LOGIT_TOKENS)  # [d_sae, LOGIT_TOKENS]
        context_text = [
            "\n".join("".join(c["tokens"]) for c in stats.contexts(f, model.tokenizer)).lower()
            for f in range(sae.cfg.d_sae)
        ]
        folder.mkdir(parents=True, exist_ok=True)
        stored = {
            "promoted": up.indices.cpu(),
            "promoted_weights": up.values.cpu(),
            "suppressed": down.indices.cpu(),
            "suppressed_weights": down.values.cpu(),
            "context_text": context_text,
        }
        partial = path.with_suffix(".partial")
        torch.save({"stats": dataclasses.asdict(stats), **stored}, partial)
        partial.replace(path)  # a crash mid-write leaves no half file under the real name
        where = {"data_name": data_path.name, "path": path}
        return FeatureIndex(stats, **stored, **where, from_cache=False)
