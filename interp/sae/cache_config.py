"""SAELens's configs for caching activations and pretokenizing a dataset (``sae_lens.config``).

``CacheActivationsRunnerConfig`` sizes a run that stores a model's activations on disk (its
buffer, batch and shard arithmetic); ``PretokenizeRunnerConfig`` describes tokenizing a
dataset. Configuration only, with SAELens 6.45.3's fields, defaults and errors. A
``context_size`` of -1 is read from the dataset's first row (needs ``datasets``, the
``harvest`` extra).

Example:
    >>> from interp.sae.config import CacheActivationsRunnerConfig
    >>> cfg = CacheActivationsRunnerConfig(dataset_path="org/data", model_name="gpt2",
    ...     model_batch_size=4, hook_name="blocks.0.hook_resid_post", d_in=16,
    ...     training_tokens=4096, context_size=64, buffer_size_gb=0.001)
    >>> cfg.new_cached_activations_path, cfg.n_tokens_in_batch, cfg.n_buffers
    ('activations/org_data/gpt2/blocks.0.hook_resid_post', 256, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from interp.sae.constants import DTYPE_MAP
from interp.sae.runner_config import default_cached_activations_path, validate_seqpos

__all__ = ["CacheActivationsRunnerConfig", "PretokenizeRunnerConfig"]


@dataclass
class CacheActivationsRunnerConfig:
    """A run caching ``hook_name``'s activations [tokens, d_in] of ``model_name`` on a dataset."""

    dataset_path: str
    model_name: str
    model_batch_size: int
    hook_name: str
    d_in: int
    training_tokens: int

    context_size: int = -1  # -1: the length of the (tokenized) dataset's first row
    model_class_name: str = "HookedTransformer"
    new_cached_activations_path: str | None = None  # default: activations/<data>/<model>/<hook>
    shuffle: bool = True
    seed: int = 42
    dtype: str = "float32"
    device: str = "cuda" if torch.cuda.is_available() else "cpu"
    buffer_size_gb: float = 2.0  # Hugging Face datasets' writer has trouble above 2 GB a shard

    # Hugging Face upload
    hf_repo_id: str | None = None
    hf_num_shards: int | None = None
    hf_revision: str = "main"
    hf_is_private_repo: bool = False

    # Model
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    model_from_pretrained_kwargs: dict[str, Any] = field(default_factory=dict)
    compile_llm: bool = False
    llm_compilation_mode: str | None = None

    # Activation store
    prepend_bos: bool = True
    seqpos_slice: tuple[int | None, ...] = (None,)
    streaming: bool = True
    autocast_lm: bool = False
    dataset_trust_remote_code: bool | None = None
    use_chat_formatting: bool = False

    def __post_init__(self) -> None:
        if self.use_chat_formatting and self.context_size == -1:
            raise ValueError(
                "context_size must be explicitly set when use_chat_formatting is True."
            )
        if self.context_size == -1:
            self.context_size = _first_row_length(self.dataset_path)
        if self.seqpos_slice is not None:
            validate_seqpos(seqpos=self.seqpos_slice, context_size=self.context_size)
        if self.context_size > self.training_tokens:
            raise ValueError(
                f"context_size ({self.context_size}) is greater than training_tokens "
                f"({self.training_tokens}). Please reduce context_size or increase "
                "training_tokens."
            )
        if self.new_cached_activations_path is None:
            self.new_cached_activations_path = default_cached_activations_path(
                self.dataset_path, self.model_name, self.hook_name, None
            )

    @property
    def sliced_context_size(self) -> int:
        """Positions kept of each context after ``seqpos_slice``."""
        if self.seqpos_slice is None:
            return self.context_size
        return len(range(self.context_size)[slice(*self.seqpos_slice)])

    @property
    def bytes_per_token(self) -> int:
        if self.dtype not in DTYPE_MAP:
            raise ValueError(f"Invalid dtype: {self.dtype}. Must be one of {list(DTYPE_MAP)}")
        return self.d_in * DTYPE_MAP[self.dtype].itemsize

    @property
    def n_tokens_in_batch(self) -> int:
        return self.model_batch_size * self.sliced_context_size

    @property
    def n_tokens_in_buffer(self) -> int:
        """Tokens a ``buffer_size_gb`` buffer holds, rounded down to whole model batches."""
        tokens = int(self.buffer_size_gb * 1e9) // self.bytes_per_token
        return tokens - tokens % self.n_tokens_in_batch

    @property
    def n_batches_in_buffer(self) -> int:
        return self.n_tokens_in_buffer // self.n_tokens_in_batch

    @property
    def n_seq_in_dataset(self) -> int:
        return self.training_tokens // self.sliced_context_size

    @property
    def n_seq_in_buffer(self) -> int:
        return self.n_tokens_in_buffer // self.sliced_context_size

    @property
    def n_buffers(self) -> int:
        return math.ceil(self.training_tokens / self.n_tokens_in_buffer)


def _first_row_length(dataset_path: str) -> int:
    """The token count of a tokenized dataset's first row (``tokens`` or ``input_ids``)."""
    from datasets import load_dataset  # the harvest extra; only this default needs it

    first_row = next(iter(load_dataset(dataset_path, split="train", streaming=True)))
    tokens = first_row.get("tokens") or first_row.get("input_ids") or None
    if tokens is None:
        raise ValueError("Dataset is not tokenized. Please specify context_size.")
    return len(tokens)


@dataclass
class PretokenizeRunnerConfig:
    """Tokenizing a dataset into ``context_size`` rows, saved locally or to the hub."""

    tokenizer_name: str = "gpt2"
    dataset_path: str = ""
    dataset_name: str | None = None
    dataset_trust_remote_code: bool | None = None
    split: str | None = "train"
    data_files: list[str] | None = None
    data_dir: str | None = None
    num_proc: int = 4
    context_size: int = 128
    column_name: str = "text"
    use_chat_formatting: bool = False
    shuffle: bool = True
    seed: int | None = None
    streaming: bool = False
    pretokenize_batch_size: int | None = 1000

    # Special tokens: "bos" / "eos" / "sep", a token id, or None
    begin_batch_token: int | Literal["bos", "eos", "sep"] | None = "bos"
    begin_sequence_token: int | Literal["bos", "eos", "sep"] | None = None
    sequence_separator_token: int | Literal["bos", "eos", "sep"] | None = "bos"
    disable_concat_sequences: bool = False

    # Where to save: a local folder and/or a hub repository
    save_path: str | None = None
    hf_repo_id: str | None = None
    hf_num_shards: int = 64
    hf_revision: str = "main"
    hf_is_private_repo: bool = False
