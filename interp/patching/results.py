"""Labelled patching results: a tensor that also knows its axis names and labels.

A ``LabelledTensor`` is a ``torch.Tensor`` (so TransformerLens-style code keeps working:
indexing, ``.max()``, ``torch.allclose``), plus ``axis_names`` such as ``("layer", "pos")``
and ``axis_labels``, one list of strings per axis: ``"L3"`` for layers, ``"H7"`` for heads,
``"token|position"`` for positions. Any torch operation on it returns a plain tensor, since the
labels may no longer fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

POSITION_AXES = ("pos", "dest_pos", "src_pos")
HEAD_AXES = ("head", "head_index")


class LabelledTensor(Tensor):
    """A tensor with named, labelled axes, ready for ``interp.viz.plots.imshow``.

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> result = interp.patching.get_act_patch_resid_pre(
        ...     model, corrupted_tokens, clean_cache, metric)
        >>> result.axis_names, result.axis_labels[0], result.axis_labels[1][:3]
        (('layer', 'pos'), ['L0', 'L1'], ['<|bos|>|0', '172|1', '47|2'])
        >>> import interp.viz.plots
        >>> figure = interp.viz.plots.imshow(result, y_labels=result.axis_labels[0],
        ...                                  x_labels=result.axis_labels[1])
    """

    axis_names: tuple[str, ...]
    axis_labels: tuple[list[str], ...]

    @staticmethod
    def __new__(
        cls, values: Tensor, axis_names: Sequence[str], axis_labels: Sequence[Sequence[str]]
    ) -> LabelledTensor:
        if len(axis_names) != values.ndim or len(axis_labels) != values.ndim:
            raise ValueError(
                f"A [{', '.join(map(str, values.shape))}] tensor needs {values.ndim} axis names "
                f"and label lists, got {len(axis_names)} and {len(axis_labels)}."
            )
        for name, labels, size in zip(axis_names, axis_labels, values.shape, strict=True):
            if len(labels) != size:
                raise ValueError(f"Axis {name!r} has {size} entries but {len(labels)} labels.")
        result = Tensor._make_subclass(cls, values.detach())
        result.axis_names = tuple(axis_names)
        result.axis_labels = tuple(list(labels) for labels in axis_labels)
        return result

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    def labels(self, axis_name: str) -> list[str]:
        """The labels of one axis, by name (e.g. ``result.labels("pos")``)."""
        if axis_name not in self.axis_names:
            raise KeyError(f"No axis {axis_name!r}; this result has axes {self.axis_names}.")
        return self.axis_labels[self.axis_names.index(axis_name)]

    def flat_labels(self) -> list[str]:
        """One label per element in row-major order: ``"L0H3"`` for a [layer, head] result,
        ``"L2 cat|5"`` for [layer, pos] (a layer label runs straight into a head label).

        Example:
            >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
            >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
            >>> clean_logits, clean_cache = model.run_with_cache(tokens)
            >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
            ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
            >>> exact = interp.patching.get_act_patch_resid_pre(
            ...     model, corrupted_tokens, clean_cache, metric)
            >>> exact.flat_labels()[:2]   # one label a cell, in row-major order
            ['L0 <|bos|>|0', 'L0 172|1']
            >>> attribution = interp.patching.get_attr_patch_resid_pre(
            ...     model, corrupted_tokens, clean_cache, metric)
            >>> from interp.viz.plots import scatter
            >>> figure = scatter(exact.flatten(), attribution.flatten(),
            ...                  point_labels=exact.flat_labels())
        """
        cells = [""]
        previous = None
        for name, labels in zip(self.axis_names, self.axis_labels, strict=True):
            joiner = "" if previous is None or (previous == "layer" and name in HEAD_AXES) else " "
            cells = [cell + joiner + label for cell in cells for label in labels]
            previous = name
        return cells

    def plot(self, **imshow_kwargs: Any):
        """A plotly heatmap of a 2-D result with its labels (``interp.viz.plots.imshow``)."""
        from interp.viz.plots import imshow, visible_position_labels

        if self.ndim != 2:
            raise ValueError(
                f"plot() draws 2-D results; this one has axes {self.axis_names}. Index it first, "
                "e.g. result[0].plot() is a plain tensor, so use imshow(result[0], ...) instead."
            )
        y_name, x_name = self.axis_names
        y_labels, x_labels = (
            visible_position_labels(labels) if name in POSITION_AXES else labels
            for name, labels in zip(self.axis_names, self.axis_labels, strict=True)
        )
        options = dict(
            y_labels=y_labels,
            x_labels=x_labels,
            y_title=y_name,
            x_title=x_name,
        )
        options.update(imshow_kwargs)
        return imshow(self.as_subclass(Tensor), **options)

    def __repr__(self) -> str:
        return f"LabelledTensor(axes={self.axis_names}, values=\n{self.as_subclass(Tensor)!r})"

    def __reduce_ex__(self, protocol: int):
        return (_rebuild, (self.as_subclass(Tensor), self.axis_names, self.axis_labels))


def _rebuild(values: Tensor, axis_names, axis_labels) -> LabelledTensor:
    return LabelledTensor(values, axis_names, axis_labels)


def axis_labels(model: Any, corrupted_tokens: Tensor, axis_name: str, size: int) -> list[str]:
    """Labels for one axis: ``L{i}`` (layer), ``H{i}`` (head), ``token|i`` (positions, from the
    first corrupted prompt when the model has a tokenizer, else the index).

    Example:
        >>> axis_labels(model, tokens, "layer", 2)
        ['L0', 'L1']
    """
    if axis_name == "layer":
        return [f"L{i}" for i in range(size)]
    if axis_name in HEAD_AXES:
        return [f"H{i}" for i in range(size)]
    if axis_name in POSITION_AXES:
        if getattr(model, "tokenizer", None) is not None and corrupted_tokens.shape[-1] == size:
            row = corrupted_tokens.reshape(-1, corrupted_tokens.shape[-1])[0]
            return [f"{model.tokenizer.token_str(int(t))}|{i}" for i, t in enumerate(row)]
        return [str(i) for i in range(size)]
    return [str(i) for i in range(size)]


def label_result(
    values: Tensor, axis_names: Sequence[str], model: Any, corrupted_tokens: Tensor
) -> LabelledTensor:
    """Wrap ``values`` with the standard labels of each named axis."""
    labels = [
        axis_labels(model, corrupted_tokens, name, size)
        for name, size in zip(axis_names, values.shape, strict=True)
    ]
    return LabelledTensor(values, axis_names, labels)
