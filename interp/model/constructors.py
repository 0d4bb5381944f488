"""Building a HookedTransformer from a checkpoint, saving it, and processing its weights:
TransformerLens's ``from_pretrained``, ``from_pretrained_no_processing``, ``from_nanogpt``
and ``process_weights_``, plus ``save``. Each is a thin door into ``interp.loading``, which
does the work and builds ``cls``, the class each is called on (so a subclass of
HookedTransformer loads as itself; the loaders never import this package).

Example:
    >>> import tempfile
    >>> folder = interp.load_model("shakespeare-char").save(tempfile.mkdtemp())
    >>> model = interp.HookedTransformer.from_pretrained(folder)   # or a hub id, e.g. "gpt2"
    >>> model.cfg.normalization_type   # processed as TransformerLens: layer norms folded
    'LNPre'
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
            >>> import tempfile
            >>> folder = model.save(tempfile.mkdtemp())
            >>> sorted(path.name for path in folder.iterdir())
            ['config.json', 'model.safetensors']
        """
        if self.cfg.tp_size > 1:
            raise ValueError(
                f"This model is one rank's share of a tensor-parallel model (tp_size="
                f"{self.cfg.tp_size}): its blocks hold part of the heads and neurons, so save "
                "would write a partial checkpoint. Save the checkpoint it was loaded from instead."
            )
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
        tp_size: int = 1,
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

        ``tp_size=N`` (interp's own), called on every rank of ``torchrun --nproc_per_node
        N``: tensor parallel, each rank holding its share of every block's heads and neurons,
        hooks seeing whole activations (see ``interp.distributed``).

        Example:
            >>> import tempfile
            >>> folder = interp.load_model("shakespeare-char").save(tempfile.mkdtemp())
            >>> model = interp.HookedTransformer.from_pretrained(folder, device="cpu")
            >>> model.cfg.normalization_type   # layer norms folded into the next weights
            'LNPre'
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
        steps = dict(
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
        )
        if tp_size != 1:
            from interp.distributed.pretrained import load_pretrained_tp

            model = load_pretrained_tp(
                model_name,
                tp_size,
                device=device if move_to_device else "cpu",
                dtype=dtype,
                tokenizer=tokenizer,
                hf_model=hf_model,
                model_class=cls,
                **steps,
            )
            if default_prepend_bos is not None:
                model.cfg.default_prepend_bos = default_prepend_bos
            return model
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
            >>> import tempfile
            >>> shakespeare = interp.load_model("shakespeare-char")
            >>> folder = shakespeare.save(tempfile.mkdtemp())
            >>> model = interp.HookedTransformer.from_pretrained_no_processing(folder)
            >>> model.cfg.normalization_type, torch.equal(model.W_E, shakespeare.W_E)
            ('LN', True)
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
            >>> import os, tempfile
            >>> from interp.loading.nanogpt import nanogpt_shapes
            >>> args = dict(n_layer=1, n_head=2, n_embd=8, vocab_size=65, block_size=16, bias=False)
            >>> weights = {name: torch.randn(shape) for name, shape in nanogpt_shapes(args).items()}
            >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")   # as nanoGPT's train.py saves
            >>> torch.save({"model": weights, "model_args": args}, path)
            >>> model = interp.HookedTransformer.from_nanogpt(path)
            >>> model.cfg.n_heads, model.cfg.d_vocab, model.cfg.act_fn
            (2, 65, 'gelu')
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
            >>> import tempfile
            >>> folder = interp.load_model("shakespeare-char").save(tempfile.mkdtemp())
            >>> model = interp.HookedTransformer.from_pretrained_no_processing(folder)
            >>> log_probs = model("To be").log_softmax(-1)
            >>> model.process_weights_(fold_ln=True, center_unembed=False).cfg.normalization_type
            'LNPre'
            >>> torch.allclose(model("To be").log_softmax(-1), log_probs, atol=1e-4)
            True
        """
        return process_weights(
            self,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
        )
