"""What every model family's adapter is made of: a config mapping and a tensor table
(its tensor converters are in ``converters``, its config-field readers in ``config_fields``).

A family maps its Hugging Face ``config.json`` to ``HookedTransformerConfig`` fields, and
lists the checkpoint's tensors as ``Row``s: each a checkpoint name, the shape its config
implies, and how it becomes our parameters. One table serves both the check (every name
and shape, before any weight is read) and the conversion (one tensor at a time).
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import Shape, TensorSource, check_names_and_shapes

Convert = Callable[[Tensor | None], dict[str, Tensor]]


@dataclass(frozen=True)
class Row:
    """One checkpoint tensor (``None``: made from nothing, e.g. a zero bias) of ``shape``,
    and ``convert``, which turns it into our parameters by name. ``convert=None`` marks a
    tensor a checkpoint may hold that is not used (an ``lm_head`` tied to the embedding)."""

    checkpoint: str | None
    shape: Shape
    convert: Convert | None


@dataclass(frozen=True)
class Family:
    """A model family's adapter (see the module docstring).

    ``config`` maps the text model's config.json fields (Hugging Face's defaults already
    filled in) to ``HookedTransformerConfig`` fields; ``table`` lists its tensors for a config.
    ``renames`` replace checkpoint name prefixes (a multimodal wrapper's); ``ignored``
    matches checkpoint tensors that are not weights of the text model. ``default_tokenizer``
    names the tokenizer a checkpoint folder without tokenizer files gets (None: none, and the
    model's ``tokenizer_name`` is the checkpoint's own name).
    """

    name: str
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    defaults: dict[str, Any]
    config: Callable[[dict[str, Any]], dict[str, Any]]
    table: Callable[[HookedTransformerConfig, dict[str, Any]], list[Row]]
    renames: tuple[tuple[str, str], ...] = ()
    ignored: re.Pattern[str] = field(default=re.compile(r"$^"))
    default_tokenizer: str | None = None

    def text_values(self, hf_config: dict[str, Any]) -> dict[str, Any]:
        """config.json's text-model fields (a multimodal wrapper's ``text_config``) over
        Hugging Face's defaults for this family, as ``transformers`` reads them."""
        values = hf_config.get("text_config") or hf_config
        if not isinstance(values, dict):
            raise ValueError(
                f"field 'text_config' is {values!r}; it must be a JSON object of the text "
                "model's config fields."
            )
        merged = self.defaults | values
        if "tie_word_embeddings" in hf_config and "text_config" in hf_config:
            merged["tie_word_embeddings"] = hf_config["tie_word_embeddings"]
        return merged

    def hooked_config(self, hf_config: dict[str, Any], **overrides: Any) -> HookedTransformerConfig:
        """The ``HookedTransformerConfig`` of a config.json of this family.

        Example:
            >>> import transformers
            >>> from interp.loading.families import LLAMA
            >>> config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64,
            ...     num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2)
            >>> LLAMA.hooked_config(config.to_dict()).n_key_value_heads   # or a config.json's
            2
        """
        values = self.text_values(hf_config)
        architectures = hf_config.get("architectures") or [self.architectures[0]]
        name = hf_config.get("_name_or_path") or self.name
        fields = self.config(values) | dict(
            original_architecture=architectures[0], model_name=name, tokenizer_name=name
        )
        return HookedTransformerConfig(**(fields | overrides))

    def checked_source(
        self,
        source: TensorSource,
        cfg: HookedTransformerConfig,
        hf_config: dict[str, Any],
        what: str,
    ) -> tuple[TensorSource, list[Row]]:
        """``source`` under canonical names, and the rows to convert, after checking every
        name and shape against what ``cfg`` implies (one error lists every problem).

        An unembedding the checkpoint holds although ``cfg`` ties it to the embedding is used
        (as Hugging Face does), with a warning when the two differ (``untied_by_checkpoint``);
        a tied checkpoint that holds the unembedding alone gives it to the embedding too.
        """
        originals: dict[str, str] = {}
        for name in source.shapes:
            canonical = self.canonical_name(name)
            if canonical is not None:
                originals[canonical] = name
        values = self.text_values(hf_config)
        rows = self.table(cfg, values)
        head = next((row for row in rows if row.convert is None), None)
        embedding_name = rows[0].checkpoint
        if head is not None and head.checkpoint in originals:
            if embedding_name not in originals:  # Hugging Face ties the embedding to the head
                originals[embedding_name] = originals.pop(head.checkpoint)
            else:
                untied = copy.copy(cfg)
                untied.tie_word_embeddings = False
                rows = untied_by_checkpoint(self.table(untied, values), head.checkpoint, what)
        found = {canonical: source.shapes[name] for canonical, name in originals.items()}
        expected = {
            row.checkpoint: row.shape for row in rows if row.checkpoint and row.convert is not None
        }
        hints = []
        if self.renames and any(originals[name] != name for name in found):
            prefixes = ", ".join(repr(old) for old, _ in self.renames)
            hints.append(
                f"Names are shown with the text model's prefix (the checkpoint has {prefixes})."
            )
        head_name = unembedding_name(rows)
        if not cfg.tie_word_embeddings and head_name not in found:
            hints.append(
                f"config.json says tie_word_embeddings: false, so the unembedding is its own "
                f"{head_name}; if it is the embedding's, set tie_word_embeddings to true."
            )
        check_names_and_shapes(found, expected, what, " ".join(hints))
        return TensorSource(found, lambda name: source.take(originals[name])), rows

    def checked_tensors(
        self,
        source: TensorSource,
        cfg: HookedTransformerConfig,
        hf_config: dict[str, Any],
        what: str,
    ) -> Iterator[tuple[str, Tensor]]:
        """Every name and shape checked now (``checked_source``), then our parameters one
        checkpoint tensor at a time (``iter_tensors``), for ``build_model``."""
        checked, rows = self.checked_source(source, cfg, hf_config, what)
        return iter_tensors(checked, rows)

    def canonical_name(self, name: str) -> str | None:
        """The name of a checkpoint tensor in this family's table, or None if it is ignored."""
        if self.ignored.search(name):
            return None
        for old, new in self.renames:
            if name.startswith(old):
                return new + name.removeprefix(old)
        return name


def iter_tensors(source: TensorSource, rows: list[Row]) -> Iterator[tuple[str, Tensor]]:
    """Our parameters, one checkpoint tensor at a time (each is read once, then forgotten)."""
    for row in rows:
        if row.convert is None:
            continue
        tensor = source.take(row.checkpoint) if row.checkpoint is not None else None
        yield from row.convert(tensor).items()
        del tensor


def unembedding_name(rows: list[Row]) -> str:
    """The checkpoint name of the unembedding in a family's table (its last named row)."""
    return [row.checkpoint for row in rows if row.checkpoint is not None][-1]


def untied_by_checkpoint(rows: list[Row], head_name: str, what: str) -> list[Row]:
    """An untied table (``rows``) for a checkpoint whose config ties the embeddings but which
    holds its own unembedding ``head_name``: Hugging Face keeps that tensor (it ties the two
    only when they are equal), so it is ``W_U`` here too, with a warning when it differs
    from the embedding. The unembedding row moves next to the embedding's, so the two are
    compared as they are read and the embedding is not held longer."""
    embedding_row = rows[0]
    head_row = next(row for row in rows if row.checkpoint == head_name)
    read: dict[str, Tensor] = {}

    def keep_embedding(tensor: Tensor | None) -> dict[str, Tensor]:
        read["embedding"] = tensor
        return embedding_row.convert(tensor)

    def compare_head(tensor: Tensor | None) -> dict[str, Tensor]:
        check_tied(read.pop("embedding"), tensor, embedding_row.checkpoint, head_name, what)
        return head_row.convert(tensor)

    others = [row for row in rows[1:] if row is not head_row]
    return [
        Row(embedding_row.checkpoint, embedding_row.shape, keep_embedding),
        Row(head_name, head_row.shape, compare_head),
        *others,
    ]


def check_tied(
    embedding: Tensor, head: Tensor, embedding_name: str, head_name: str, what: str
) -> None:
    """Warn when a checkpoint whose config ties the embeddings holds an unembedding ``head``
    that differs from its ``embedding`` (Hugging Face then keeps both, and so does interp)."""
    if head.shape != embedding.shape or not torch.equal(head, embedding):
        warnings.warn(
            f"{what}: config.json says tie_word_embeddings: true, but its {head_name} differs "
            f"from its {embedding_name}; the checkpoint's {head_name} is used as the "
            "unembedding (as Hugging Face does). Set tie_word_embeddings to false in "
            "config.json to silence this warning.",
            stacklevel=2,
        )
