"""Building a HookedTransformer from a checkpoint, saving it, and processing its weights:
TransformerLens's ``from_pretrained``, ``from_pretrained_no_processing``, ``from_nanogpt``
and ``process_weights_``, plus ``save``. Each is a thin door into ``interp.loading``, which
does the work and builds ``cls``, the class each is called on (so a subclass of
HookedTransformer loads as itself; the loaders never import this package).

Example:
    >>> model = HookedTransformer.from_pretrained("gpt2-small")
    >>> model.save("checkpoints/gpt2-small")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from interp.loading.nanogpt import load_nanogpt
from interp.loading.native import save_native
from interp.loading.pretrained import load_pretrained
from interp.loading.processing import process_weights

if TYPE_CHECKING:
    from interp.model import HookedTransformer


class ModelLoadingMixin:
    """TransformerLens's constructors from checkpoints and ``process_weights_``, and ``save``."""

    def save(self, folder: str | Path) -> Path:
        """Save config, tokenizer and weights to ``folder`` in interp's native format
        (``interp.loading.native``); ``interp.loading.native.load_native`` reads it back.

        Example:
            >>> model.save("checkpoints/my-model")
        """
        return save_native(self, folder)

    @classmethod
    def from_pretrained(
        cls,
        model_name: str | Path,
        fold_ln: bool = True,
        center_writing_weights: bool = True,
        center_unembed: bool = True,
        refactor_factored_attn_matrices: bool = False,
        checkpoint_index: int | None = None,
        checkpoint_value: int | None = None,
        hf_model: Any = None,
        device: torch.device | str | None = None,
        n_devices: int = 1,
        tokenizer: Any = None,
        move_to_device: bool = True,
        fold_value_biases: bool = True,
        default_prepend_bos: bool | None = None,
        default_padding_side: str | None = None,
        dtype: torch.dtype | str | None = None,
        first_n_layers: int | None = None,
    ) -> HookedTransformer:
        """A model from a TransformerLens name or hub id (``"gpt2-small"``, ``"gpt2"``,
        ``"gpt2-medium"``, ..., read from the Hugging Face cache when offline), a Hugging Face
        GPT-2 folder, a folder saved by ``save``, or ``hf_model``, an in-memory
        ``GPT2LMHeadModel``. TransformerLens 2.x's signature and defaults.

        As in TransformerLens, the weights are processed (layer norms folded, writing weights
        and unembedding centred, value biases folded): log-probabilities are unchanged and
        activations equal TransformerLens's, but logits differ from Hugging Face's by a
        per-position constant. ``from_pretrained_no_processing`` gives Hugging Face's numbers.
        See ``interp.loading.pretrained.load_pretrained``.

        Example:
            >>> model = HookedTransformer.from_pretrained("gpt2-small", device="cuda")
        """
        unsupported = {
            "checkpoint_index": (checkpoint_index, None),
            "checkpoint_value": (checkpoint_value, None),
            "n_devices": (n_devices, 1),
            "first_n_layers": (first_n_layers, None),
            "default_padding_side": (default_padding_side, None),
        }
        for name, (value, default) in unsupported.items():
            if value != default and not (name == "default_padding_side" and value == "right"):
                raise ValueError(
                    f"from_pretrained({name}={value!r}) is not supported yet (interp loads the "
                    f"final GPT-2-family weights on one device); leave {name} at {default!r}."
                )
        model = load_pretrained(
            model_name,
            device=device if move_to_device else "cpu",
            dtype=dtype,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
            tokenizer=tokenizer,
            hf_model=hf_model,
            model_class=cls,
        )
        if default_prepend_bos is not None:
            model.cfg.default_prepend_bos = default_prepend_bos
        return model

    @classmethod
    def from_pretrained_no_processing(
        cls,
        model_name: str | Path,
        fold_ln: bool = False,
        center_writing_weights: bool = False,
        center_unembed: bool = False,
        refactor_factored_attn_matrices: bool = False,
        fold_value_biases: bool = False,
        **kwargs: Any,
    ) -> HookedTransformer:
        """``from_pretrained`` with every processing step off: the checkpoint's exact weights,
        so logits equal Hugging Face's (TransformerLens 2.x's function of the same name).

        Example:
            >>> model = HookedTransformer.from_pretrained_no_processing("gpt2")
            >>> torch.allclose(model(tokens), hf_gpt2(tokens).logits, atol=1e-4)
            True
        """
        return cls.from_pretrained(
            model_name,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
            fold_value_biases=fold_value_biases,
            **kwargs,
        )

    @classmethod
    def from_nanogpt(
        cls,
        path: str | Path | dict[str, Any],
        device: torch.device | str | None = None,
        dtype: torch.dtype | str | None = None,
        tokenizer: Any = None,
        model_args: dict[str, Any] | None = None,
    ) -> HookedTransformer:
        """A model from a nanoGPT ``train.py`` checkpoint (or a bare state dict, with
        ``model_args={"n_head": ...}``). See ``interp.loading.nanogpt.load_nanogpt``.

        Example:
            >>> model = HookedTransformer.from_nanogpt("out/ckpt.pt")
        """
        return load_nanogpt(
            path, device, dtype, tokenizer=tokenizer, model_args=model_args, model_class=cls
        )

    def process_weights_(
        self,
        fold_ln: bool = True,
        center_writing_weights: bool = True,
        center_unembed: bool = True,
        fold_value_biases: bool = True,
        refactor_factored_attn_matrices: bool = False,
    ) -> HookedTransformer:
        """Rewrite the weights in place without changing the log-probabilities (TransformerLens's
        processing); returns the model. See ``interp.loading.processing``.

        Example:
            >>> model.process_weights_(fold_ln=True, center_unembed=False)
        """
        return process_weights(
            self,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
        )
