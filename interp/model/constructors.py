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

from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from interp.loading.checkpoint import placed_by
from interp.loading.nanogpt import load_nanogpt
from interp.loading.native import save_native
from interp.loading.pretrained import load_pretrained
from interp.loading.processing import process_weights
from interp.utils.device_map import resolve_device_map

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
        *,
        device_map: dict[str, Any] | str | None = None,
        max_memory: dict[Any, int | str] | None = None,
        dequantize_experts: bool = False,
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

        Layers over devices, in one process: ``n_devices=N`` puts contiguous blocks on
        ``device`` (default ``"cuda"``) index 0 to N-1, balanced by bytes, the embedding on
        the first and ``ln_final``/``unembed`` on the last; ``device_map`` names each
        module's device (``{"embed": "cpu", "blocks.0": "cuda:0", ..., "unembed": "cpu"}``,
        prefixes such as ``"blocks"`` allowed), or ``"auto"`` fills ``max_memory``'s devices
        in order (``{"cuda:0": "20GiB", "cpu": "64GiB"}``). Each tensor is read straight onto
        its device; the plan is checked before any is read. See ``interp.model.devices``.

        gpt-oss's MXFP4 experts stay MXFP4 in memory (dequantized per expert in the forward,
        the same numbers; ``fold_ln`` is then skipped with a warning); ``dequantize_experts=
        True`` dequantizes them at load instead (about 3.7x the experts' bytes in bf16).

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
            "first_n_layers": (first_n_layers, None),
            "default_padding_side": (default_padding_side, None),
        }
        for name, (value, default) in unsupported.items():
            if value != default and not (name == "default_padding_side" and value == "right"):
                raise ValueError(
                    f"from_pretrained({name}={value!r}) is not supported yet (interp loads a "
                    f"checkpoint's final weights, whole); leave {name} at {default!r}."
                )
        steps = dict(
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
        )
        if tp_size != 1:
            if n_devices != 1 or device_map is not None:
                raise ValueError(
                    f"from_pretrained(tp_size={tp_size}) splits every block over the torchrun "
                    "ranks; it cannot also lay blocks over devices (n_devices, device_map). "
                    "Use one or the other."
                )
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
        placement = _placement(n_devices, device, device_map, max_memory, move_to_device)
        if placement is not None:
            device = "cpu"  # the modules the plan names go where it says
        with placed_by(placement) if placement is not None else nullcontext():
            model = load_pretrained(
                model_name,
                device=device if move_to_device else "cpu",
                dtype=dtype,
                **steps,
                tokenizer=tokenizer,
                hf_model=hf_model,
                model_class=cls,
                dequantize_experts=dequantize_experts,
            )
        if placement is not None:  # a loader that placed all on one device: moved now
            planned = placement(model)  # the plan the load followed (or made now)
            wanted = {name: planned[name] for name in model.device_map}
            if model.device_map != wanted:
                model.place_modules(wanted)
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


def _placement(
    n_devices: int,
    device: Any,
    device_map: dict[str, Any] | str | None,
    max_memory: dict[Any, int | str] | None,
    move_to_device: bool,
) -> Callable[[Any], dict[str, str]] | None:
    """The plan ``from_pretrained`` loads by (module -> device, from the model built on the
    meta device), or None for one device; the arguments' conflicts named first."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer, got {n_devices!r}.")
    if device_map is None and max_memory is not None:
        raise ValueError("max_memory goes with device_map='auto'; pass both, or neither.")
    if device_map is None and n_devices == 1:
        return None
    if device_map is not None and n_devices != 1:
        raise ValueError(
            f"pass n_devices={n_devices} (blocks balanced over that many devices) or "
            "device_map (each module's device), not both."
        )
    if device_map is not None and device is not None:
        raise ValueError(
            f"device={device!r} and device_map both say where the weights go; pass one."
        )
    if not move_to_device:
        raise ValueError(
            "move_to_device=False keeps the weights on the CPU, but n_devices/device_map "
            "place them; drop one of them."
        )
    plans: list[dict[str, str]] = []  # made once, on the model built on the meta device

    def plan(model: Any) -> dict[str, str]:
        if not plans:
            plans.append(resolve_device_map(model, device_map, n_devices, device, max_memory))
        return plans[0]

    return plan
