"""The local replacement model: a HookedTransformer whose MLPs are read through transcoders,
frozen for one prompt so that it is linear in its residual stream (circuit-tracer's
``ReplacementModel``, without copying or changing the wrapped model).

Frozen while attributing (and only then, inside ``replacement.linearized()``): every
attention pattern, every norm's scale (``ln1``, ``ln2``, ``ln1_post``, ``ln2_post``,
``ln_final``), every parameter; at each transcoder output hook the activation becomes
``skip(x) + (out - skip(x)).detach()``, so the skip connection is the only gradient path
through an MLP. The gradient starts at ``hook_embed``.

Example:
    >>> from interp.circuits import attribute
    >>> tcs = load_transcoders("shakespeare-char-transcoders")
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> graph = attribute("ROMEO:", replacement, max_feature_nodes=8, batch_size=64)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.circuits import intervention
from interp.circuits.cross_layer import CrossLayerTranscoder
from interp.circuits.replacement_model import transcoder_hooks
from interp.circuits.transcoders import TranscoderSet, load_transcoders
from interp.components.norms import LayerNorm
from interp.sae.model_match import check_model_match

MLP_HOOKS = ("mlp.hook_in", "mlp.hook_out")  # circuit-tracer's names: the MLP's input, output


@dataclass
class LinearizedRun:
    """What one frozen forward recorded: the transcoders' inputs and outputs (in the autograd
    graph), the embedding leaf, the outputs' values before the skip substitution, and the
    frozen values (every ``hook_pattern`` and ``hook_scale``, by hook name)."""

    inputs: list[Tensor | None]
    outputs: list[Tensor | None]
    output_values: list[Tensor | None]
    embed: list[Tensor] = field(default_factory=list)
    frozen: dict[str, Tensor] = field(default_factory=dict)


class ReplacementModel:
    """A HookedTransformer (loaded without weight processing) with a transcoder set.

    Attribute access falls through to the model (``cfg``, ``tokenizer``, ``W_E``, ...).
    Transcoders whose config names another model (``model_name``) are refused unless
    ``allow_model_mismatch=True`` (``interp.sae.model_match``).
    """

    def __init__(
        self,
        model: nn.Module,
        transcoders: TranscoderSet | CrossLayerTranscoder,
        allow_model_mismatch: bool = False,
    ) -> None:
        self.model = model
        self.transcoders = transcoders
        self._check(allow_model_mismatch)
        name = str(model.cfg.model_name)
        gemma_3_it = "gemma-3" in name and name.endswith("-it")  # <bos><start_of_turn>user\n
        self.zero_positions = slice(0, 4) if gemma_3_it else slice(0, 1)  # features, errors

    @classmethod
    def from_model(
        cls,
        model: nn.Module,
        transcoders: TranscoderSet | CrossLayerTranscoder | str | Path | list,
        allow_model_mismatch: bool = False,
    ) -> ReplacementModel:
        """Wrap ``model`` (nothing copied, nothing changed) with ``transcoders`` (a set, or
        what ``load_transcoders`` reads), moved to the model's device and dtype;
        ``allow_model_mismatch=True`` takes transcoders made for another model."""
        if not isinstance(transcoders, (TranscoderSet, CrossLayerTranscoder)):
            transcoders = load_transcoders(transcoders)
        transcoders.to(model.cfg.device, model.cfg.dtype)
        return cls(model, transcoders, allow_model_mismatch)

    @classmethod
    def from_pretrained(
        cls,
        name_or_folder: str,
        transcoders: TranscoderSet | str | Path | list,
        backend: str = "transformerlens",
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        lazy_encoder: bool = False,
        lazy_decoder: bool = True,
        allow_model_mismatch: bool = False,
        **kwargs: Any,
    ) -> ReplacementModel:
        """Load ``name_or_folder`` (``interp.shipped.by_name.load_named_model``: a model
        shipped with interp, e.g. ``"shakespeare-char"``, a checkpoint folder or a hub id,
        without folding or centring, as circuit-tracer loads) on ``device`` in ``dtype``,
        ``kwargs`` to ``from_pretrained_no_processing``, then ``from_model``.
        circuit-tracer's ``backend`` ("nnsight" too) is interp's model here;
        ``lazy_encoder``/``lazy_decoder`` are accepted for its scripts, and the transcoders
        are read whole. ``allow_model_mismatch`` as ``from_model``'s."""
        _check_backend(backend)
        from interp.shipped.by_name import load_named_model

        model = load_named_model(name_or_folder, device=device, dtype=dtype, **kwargs)
        return cls.from_model(model, transcoders, allow_model_mismatch)

    @classmethod
    def from_pretrained_and_transcoders(
        cls,
        model_name: str,
        transcoders: TranscoderSet | CrossLayerTranscoder,
        **kwargs: Any,
    ) -> ReplacementModel:
        """circuit-tracer's name for ``from_pretrained`` with transcoders already loaded."""
        return cls.from_pretrained(model_name, transcoders, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in ("model", "transcoders"):  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    @property
    def feature_input_hook(self) -> str:
        return self.transcoders.feature_input_hook

    @property
    def feature_output_hook(self) -> str:
        return self.transcoders.feature_output_hook

    @property
    def scan(self) -> str | list[str] | None:
        return self.transcoders.scan

    @property
    def skip_transcoder(self) -> bool:
        return self.transcoders.skip_connection

    def ensure_tokenized(self, prompt: str | Tensor | list[int]) -> Int[Tensor, " pos"]:
        """The prompt's token ids as ``attribute`` reads them (a special token prepended)."""
        from interp.circuits.attribution import ensure_tokenized

        return ensure_tokenized(prompt, self)

    @contextlib.contextmanager
    def zero_softcap(self) -> Iterator[None]:
        """Within the block, the output logits are not soft-capped (circuit-tracer's: it
        sets the config's cap to 0, which every forward reads)."""
        cap = self.model.cfg.output_logits_soft_cap
        try:
            self.model.cfg.output_logits_soft_cap = 0.0
            yield
        finally:
            self.model.cfg.output_logits_soft_cap = cap

    # --------------------------------------------------------------------- checks
    def _check(self, allow_model_mismatch: bool = False) -> None:
        cfg, tcs = self.model.cfg, self.transcoders
        what = f"The transcoders {tcs.scan!r}" if tcs.scan else "The transcoders"
        check_model_match(tcs, self.model, allow_model_mismatch, what)
        if cfg.attn_only:
            raise ValueError("An attention-only model has no MLPs for transcoders to replace.")
        if tcs.n_layers != cfg.n_layers:
            raise ValueError(
                f"The transcoder set has {tcs.n_layers} layers but the model has "
                f"{cfg.n_layers}; use one transcoder a layer, for this model."
            )
        for layer, (d_in, d_out) in enumerate(tcs.widths):
            if d_in != cfg.d_model or d_out != cfg.d_model:
                raise ValueError(
                    f"Layer {layer}'s transcoder maps width {d_in} -> {d_out}, but the "
                    f"model's d_model is {cfg.d_model}: these transcoders are for another model."
                )
        names = set(self.model.hook_dict)
        for hook in (tcs.feature_input_hook, tcs.feature_output_hook):
            if hook not in MLP_HOOKS and f"blocks.0.{hook}" not in names:
                raise ValueError(
                    f"Transcoder hook {hook!r} is not a hook point of the model's blocks (e.g. "
                    f"'ln2.hook_normalized', 'hook_mlp_out') nor one of {MLP_HOOKS}."
                )
        if tcs.feature_output_hook not in ("hook_mlp_out", "mlp.hook_out"):
            raise ValueError(
                f"feature_output_hook={tcs.feature_output_hook!r}: a transcoder replaces an "
                "MLP, so it writes 'hook_mlp_out' or 'mlp.hook_out'."
            )

    # ------------------------------------------------------------ transcoder I/O
    @property
    def reads_before_ln2_affine(self) -> bool:
        """Whether the transcoders read ln2's normalised input before its weight and bias,
        which interp's LayerNorm ``ln2.hook_normalized`` is after (TransformerLens 2.x).

        A transcoder set reading ``ln2.hook_normalized`` is read as circuit-tracer reads it:
        on TransformerLens 3, whose LayerNorm ``hook_normalized`` is ``(x - mean) / scale``,
        before the weight and bias (RMSNorm's is before the weight in both). Such a set is
        fed that value, computed from ln2's input with the scale ln2 used (frozen, when
        frozen)."""
        ln2 = getattr(self.model.blocks[0], "ln2", None)
        return (
            self.feature_input_hook == "ln2.hook_normalized"
            and isinstance(ln2, LayerNorm)
            and ln2.w is not None
        )

    @contextlib.contextmanager
    def transcoder_io(
        self,
        at_input: Callable[[int, Tensor], None] | None = None,
        at_output: Callable[[int, Tensor], Tensor | None] | None = None,
        fwd_hooks: Sequence[tuple[str, Callable]] = (),
    ) -> Iterator[None]:
        """Within the block, forwards of ``self.model`` call ``at_input(layer, x)`` with each
        transcoder's input ``x`` [batch, pos, d_model] and ``at_output(layer, out)`` with
        its output hook's value (returning a new value, or None to keep it), after the
        hook-point hooks ``fwd_hooks``. The one place that knows where a transcoder reads
        and writes: hook points, the MLP module's input and output (``mlp.hook_in`` /
        ``mlp.hook_out``), or ln2's input normalised before its affine map."""
        hooks, handles = list(fwd_hooks), []
        try:
            for layer, block in enumerate(self.model.blocks):
                if at_input is not None:
                    self._attach_input(layer, block, at_input, hooks, handles)
                if at_output is None:
                    continue
                if self.feature_output_hook == "mlp.hook_out":
                    handles.append(
                        block.mlp.register_forward_hook(
                            lambda m, args, out, layer=layer: at_output(layer, out)
                        )
                    )
                else:
                    hook_out = f"blocks.{layer}.{self.feature_output_hook}"
                    hooks.append((hook_out, lambda x, hook, layer=layer: at_output(layer, x)))
            with self.model.hooks(fwd_hooks=hooks):
                yield
        finally:
            for handle in handles:
                handle.remove()

    def _attach_input(
        self,
        layer: int,
        block: nn.Module,
        at_input: Callable[[int, Tensor], None],
        hooks: list[tuple[str, Callable]],
        handles: list[Any],
    ) -> None:
        """Call ``at_input(layer, x)`` with the transcoder input of ``block``."""
        if self.feature_input_hook == "mlp.hook_in":
            handles.append(
                block.mlp.register_forward_pre_hook(
                    lambda m, args, layer=layer: at_input(layer, args[0])
                )
            )
        elif self.reads_before_ln2_affine:
            scales: list[Tensor] = []  # [batch, pos, 1]: the scale ln2 divided by

            def record_scale(scale: Tensor, hook: Any) -> None:
                scales[:] = [scale]

            record_scale.reads_only = True  # type: ignore[attr-defined]

            def normalized(norm: nn.Module, args: tuple, out: Tensor, layer: int = layer) -> None:
                x = args[0]
                x32 = x if x.dtype in (torch.float32, torch.float64) else x.float()
                centred = x32 - x32.mean(-1, keepdim=True)
                at_input(layer, (centred / scales.pop()).to(x.dtype))

            hooks.append((f"blocks.{layer}.ln2.hook_scale", record_scale))
            handles.append(block.ln2.register_forward_hook(normalized))
        else:
            hook_in = f"blocks.{layer}.{self.feature_input_hook}"
            hooks.append((hook_in, lambda x, hook, layer=layer: at_input(layer, x)))

    # ------------------------------------------------------------------- the run
    @contextlib.contextmanager
    def linearized(self) -> Iterator[LinearizedRun]:
        """Within the block, forwards of ``self.model`` run the frozen local replacement
        model and record a ``LinearizedRun``; afterwards the model is as it was (hooks
        removed, ``requires_grad`` flags restored)."""
        n_layers = self.model.cfg.n_layers
        run = LinearizedRun([None] * n_layers, [None] * n_layers, [None] * n_layers)
        flags = [(param, param.requires_grad) for param in self.model.parameters()]

        def record_input(layer: int, activation: Tensor) -> None:
            run.inputs[layer] = activation

        def replace_output(layer: int, activation: Tensor) -> Tensor:
            """The skip path plus a detached remainder: the only gradient path through an
            MLP is its transcoder's skip connection."""
            if self.transcoders.skip_connection:
                skip = self.transcoders.skip(layer, run.inputs[layer]).to(activation.dtype)
                replaced = skip + (activation - skip).detach()
            else:  # no gradient path through the MLP: the output is where gradients end
                replaced = activation.detach().requires_grad_(True)
            run.outputs[layer], run.output_values[layer] = replaced, activation.detach()
            return replaced

        try:
            for param, _ in flags:
                param.requires_grad_(False)
            freezing = self._freezing_hooks(run)
            with torch.enable_grad(), self.transcoder_io(record_input, replace_output, freezing):
                yield run
        finally:
            for param, flag in flags:
                param.requires_grad_(flag)

    def _freezing_hooks(self, run: LinearizedRun) -> list[tuple[str, Callable]]:
        def detach(activation: Tensor, hook: Any) -> Tensor:
            run.frozen[hook.name] = activation.detach()
            return run.frozen[hook.name]

        def start_gradient(activation: Tensor, hook: Any) -> Tensor:
            leaf = activation.detach().requires_grad_(True)
            run.embed[:] = [leaf]
            return leaf

        frozen = [
            name
            for name in self.model.hook_dict
            if name.endswith("attn.hook_pattern") or name.endswith("hook_scale")
        ]
        return [("hook_embed", start_gradient)] + [(name, detach) for name in frozen]

    # -------------------------------------------------------------- interventions
    def feature_intervention(
        self,
        inputs: str | Tensor,
        interventions: Sequence[intervention.Intervention],
        constrained_layers: Sequence[int] | None = None,
        freeze_attention: bool = True,
        apply_activation_function: bool = True,
        sparse: bool = False,
        return_activations: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """(logits, activations) with features set to values (``interp.circuits.intervention``)."""
        return intervention.feature_intervention(
            self, inputs, interventions, constrained_layers, freeze_attention,
            apply_activation_function, sparse, return_activations,
        )  # fmt: skip

    def feature_intervention_generate(
        self,
        inputs: str | Tensor,
        interventions: Sequence[intervention.Intervention],
        constrained_layers: Sequence[int] | None = None,
        freeze_attention: bool = True,
        apply_activation_function: bool = True,
        sparse: bool = False,
        return_activations: bool = True,
        **generate_kwargs: Any,
    ) -> tuple[Any, Tensor, Tensor | None]:
        """(generation, logits of each step, activations) of ``generate`` with features set
        to values (``interp.circuits.intervention``)."""
        return intervention.feature_intervention_generate(
            self, inputs, interventions, constrained_layers, freeze_attention,
            apply_activation_function, sparse, return_activations, **generate_kwargs,
        )  # fmt: skip

    def get_activations(
        self, inputs: str | Tensor, sparse: bool = False, apply_activation_function: bool = True
    ) -> tuple[Tensor, Tensor]:
        """(logits, transcoder activations [n_layers, pos, d_transcoder], position 0 zeroed)."""
        return intervention.feature_intervention(
            self, inputs, [], sparse=sparse, apply_activation_function=apply_activation_function
        )

    def run_linearized(
        self, tokens: Int[Tensor, "batch pos"]
    ) -> Float[Tensor, "batch pos d_model"]:
        """One frozen forward (inside ``linearized()``): the final norm's output."""
        residual = self.model(tokens, stop_at_layer=self.model.cfg.n_layers)
        return self.model.ln_final(residual)

    # ------------------------------------------- circuit-tracer's constructors and setup
    @classmethod
    def from_config(
        cls,
        config: Any,
        transcoders: TranscoderSet | CrossLayerTranscoder,
        backend: str = "transformerlens",
        **kwargs: Any,
    ) -> ReplacementModel:
        """A randomly initialised ``HookedTransformer(config)`` with ``transcoders``
        (circuit-tracer's ``from_config``; ``config`` a ``HookedTransformerConfig`` or its
        dict). Its tokenizer is ``config.tokenizer_name``'s when interp has it offline
        (``"gpt2"``), else none (pass ``tokenizer=``)."""
        from interp.config import HookedTransformerConfig
        from interp.model import HookedTransformer
        from interp.tokenizers import get_tokenizer

        _check_backend(backend)
        if isinstance(config, dict):
            config = HookedTransformerConfig.from_dict(config)
        if not isinstance(config, HookedTransformerConfig):
            raise TypeError(
                f"from_config takes a HookedTransformerConfig (or its dict); got "
                f"{type(config).__name__}. For a Hugging Face config, save a model made from it "
                "and use ReplacementModel.from_pretrained(folder, transcoders)."
            )
        if "tokenizer" not in kwargs and config.tokenizer_name:
            try:
                kwargs["tokenizer"] = get_tokenizer(config.tokenizer_name)
            except ValueError:  # no offline copy: no tokenizer
                pass
        return cls.from_model(HookedTransformer(config, **kwargs), transcoders)

    def setup_attribution(self, inputs: str | Tensor) -> AttributionContext:
        """circuit-tracer's ``setup_attribution``: one forward of ``inputs`` (text is
        tokenized as ``attribute`` does; ids are taken as they are) and what the graph is
        built from (``AttributionContext``). ``attribute`` computes the same internally."""
        tokens = self.ensure_tokenized(inputs) if isinstance(inputs, str) else inputs.squeeze()
        if tokens.ndim != 1:
            raise ValueError(
                f"setup_attribution takes one prompt; got shape {tuple(tokens.shape)}."
            )
        with torch.no_grad(), self.linearized() as run:
            logits = self.model(tokens[None].to(self.cfg.device))
            inputs_ = torch.cat([x.detach() for x in run.inputs])  # [n_layers, pos, d_model]
            outputs = torch.cat(run.output_values)  # [n_layers, pos, d_model]
        parts = self.transcoders.compute_attribution_components(inputs_, self.zero_positions)
        errors = outputs - parts["reconstruction"].to(outputs.dtype)
        errors[:, self.zero_positions] = 0
        return AttributionContext(
            activation_matrix=parts["activation_matrix"],
            logits=logits,
            error_vectors=errors,
            token_vectors=self.model.W_E[tokens].detach(),
            decoder_vecs=parts["decoder_vecs"],
            encoder_vecs=parts["encoder_vecs"],
            encoder_to_decoder_map=parts["encoder_to_decoder_map"],
            decoder_locations=parts["decoder_locations"],
        )

    # ---------------------------------------------- circuit-tracer's hook-level helpers
    def run_with_hooks(
        self,
        *model_args: Any,
        fwd_hooks: Sequence[tuple[str, Callable]] = (),
        bwd_hooks: Sequence[tuple[str, Callable]] = (),
        **model_kwargs: Any,
    ) -> Any:
        """The model's ``run_with_hooks``, where hooks may also be named after the
        transcoders' input and output (``blocks.{layer}.mlp.hook_in`` / ``mlp.hook_out``,
        as circuit-tracer's model has them): ``transcoder_hooks`` runs those there."""
        return transcoder_hooks.run_with_transcoder_hooks(
            self, *model_args, fwd_hooks=fwd_hooks, bwd_hooks=bwd_hooks, **model_kwargs
        )

    def _get_activation_caching_hooks(
        self, sparse: bool = False, apply_activation_function: bool = True, append: bool = False
    ) -> tuple[list, list[tuple[str, Callable]]]:
        """circuit-tracer's name: ``transcoder_hooks.caching_hooks``."""
        return transcoder_hooks.caching_hooks(self, sparse, apply_activation_function, append)

    def setup_intervention_with_freeze(
        self, inputs: str | Tensor, constrained_layers: Sequence[int] | None = None
    ) -> tuple[Tensor, list[tuple[str, Callable]]]:
        """circuit-tracer's name: ``transcoder_hooks.freeze_hooks`` (its activations and the
        hooks that freeze attention, and with ``constrained_layers`` norms and MLPs);
        ``feature_intervention`` does the same internally."""
        tokens = self.ensure_tokenized(inputs) if isinstance(inputs, str) else inputs
        return transcoder_hooks.freeze_hooks(self, tokens, constrained_layers)


@dataclass
class AttributionContext:
    """What ``setup_attribution`` found on one prompt: the sparse activations
    ``[n_layers, pos, d_transcoder]``, the logits, the error vectors ``[n_layers, pos,
    d_model]`` (MLP output minus reconstruction), the token embeddings ``[pos, d_model]``,
    the active features' encoder and activation-scaled decoder vectors, which encoder each
    decoder row belongs to, and each decoder row's (layer, position)."""

    activation_matrix: Tensor
    logits: Tensor
    error_vectors: Tensor
    token_vectors: Tensor
    decoder_vecs: Tensor
    encoder_vecs: Tensor
    encoder_to_decoder_map: Tensor
    decoder_locations: Tensor


BACKENDS = ("transformerlens", "nnsight")


def _check_backend(backend: str) -> None:
    """circuit-tracer's two backends trace the same graph; interp runs both on its own
    HookedTransformer (built from the same weights), so either name is accepted."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; use one of {BACKENDS} (both run interp's model).")


TransformerLensReplacementModel = ReplacementModel  # circuit-tracer's backend class name
