"""Export a harvest to SAELens's cached-activations layout, so SAELens trains from it.

SAELens's ``CacheActivationsRunner`` writes, and its ``ActivationsStore`` reads with
``use_cached_activations=True``, a Hugging Face ``datasets`` folder (``save_to_disk``) with
one row per sequence: a column named after the hook, ``Array2D(shape=(context_size, d_in))``,
and ``token_ids``, ``Sequence(int32, length=context_size)``. ``context_size`` is the number of
positions kept per sequence (SAELens's ``seqpos_slice`` is our ``--positions``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from safetensors import safe_open

from interp.harvest.store import ActivationStore

# Arrow has no bfloat16: bf16 shards are exported as float32.
_ARROW_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "float32"}


def _rows(path: str, files: list[str], hook: str, context: int) -> Iterator[dict[str, Any]]:
    for file in files:
        with safe_open(str(Path(path) / file), framework="pt") as shard:
            vectors = shard.get_tensor(hook).float()
            ids = shard.get_tensor("token_ids")
        vectors = vectors.reshape(-1, context, vectors.shape[-1]).numpy()
        ids = ids.reshape(-1, context).numpy()
        for sequence, sequence_ids in zip(vectors, ids, strict=True):
            yield {hook: sequence, "token_ids": sequence_ids}


def export_saelens(path: str | Path, out: str | Path, hook: str | None = None) -> Path:
    """Write ``hook``'s activations (default: the only hook) from the harvest in ``path`` as a
    SAELens cached-activations folder ``out``; returns ``out``. Needs ``datasets``.

    Example:
        >>> import tempfile
        >>> from interp.harvest import harvest
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "input.txt").write_text("To be, or not to be. " * 20)
        >>> _ = harvest("shakespeare-char", folder / "input.txt", "blocks.1.hook_resid_post",
        ...             folder / "acts", seq_len=64, progress=False)
        >>> export_saelens(folder / "acts", folder / "acts_saelens").name
        'acts_saelens'

        SAELens then reads it with ``LanguageModelSAERunnerConfig(use_cached_activations=True,
        cached_activations_path=".../acts_saelens", context_size=64, ...)``.
    """
    import datasets

    store = ActivationStore(path, hook, shuffle_buffer=0)
    config = store.manifest["config"]
    if store.hook in config.get("tensor_parallel", {}).get("hooks", {}):
        raise ValueError(
            f"{store.hook} was harvested from a tensor-parallel model in parts (one a rank); "
            "export_saelens reads whole shards and does not cover it. Harvest it in one "
            "process, or read it with ActivationStore."
        )
    context = config["tokens_per_sequence"]
    dtype = _ARROW_DTYPES[config["dtype"]]
    features = datasets.Features(
        {
            store.hook: datasets.Array2D(shape=(context, store.d), dtype=dtype),
            "token_ids": datasets.Sequence(datasets.Value("int32"), length=context),
        }
    )
    files = [record["file"] for record in store.manifest["shards"]]
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=out.parent) as cache:
        dataset = datasets.Dataset.from_generator(
            _rows,
            features=features,
            cache_dir=cache,
            gen_kwargs={"path": str(path), "files": files, "hook": store.hook, "context": context},
        )
        dataset.save_to_disk(str(out))
    return out
