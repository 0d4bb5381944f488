"""SAELens's training-time SAEs: ``TrainingSAE``, ``TrainingSAEConfig`` and one training step.

A training SAE is interp's ``SAE`` (same parameters, hook points, normalisation and
folding) that also computes its losses: ``training_forward_pass(TrainStepInput)`` encodes
(keeping the pre-activations), decodes, and returns a ``TrainStepOutput`` whose ``loss`` is

    mse_loss + sum(calculate_aux_loss(...))   mse_loss = ((sae_out - x)^2).sum(-1).mean()

The architecture's losses (L1, L0, aux-k...) come from ``calculate_aux_loss``, defined by
each subclass in ``interp.sae.saes.*`` (SAELens's module paths). Coefficients are given per
step (``TrainStepInput.coefficients``), so warm-ups are the trainer's business.

Example:
    >>> from interp.sae.saes.standard_sae import StandardTrainingSAE, StandardTrainingSAEConfig
    >>> from interp.sae.training_sae import TrainStepInput
    >>> sae = StandardTrainingSAE(StandardTrainingSAEConfig(d_in=8, d_sae=32))
    >>> step = TrainStepInput(sae_in=torch.randn(4, 8), coefficients={"l1": 1.0},
    ...                       dead_neuron_mask=None, n_training_steps=0, is_logging_step=False)
    >>> out = sae.training_forward_pass(step)
    >>> sorted(out.losses), bool(out.loss == out.losses["mse_loss"] + out.losses["l1_loss"])
    (['l1_loss', 'mse_loss'], True)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from interp.sae.config import SAEConfig
from interp.sae.metadata import SAEMetadata
from interp.sae.registry import get_sae_class, get_sae_training_class
from interp.sae.sae import SAE, _disable_hooks

__all__ = [
    "T_TRAINING_SAE_CONFIG",
    "TrainCoefficientConfig",
    "TrainStepInput",
    "TrainStepOutput",
    "TrainingSAE",
    "TrainingSAEConfig",
    "mse_loss",
]

SAE_WEIGHTS_FILENAME = "sae_weights.safetensors"
SAE_CFG_FILENAME = "cfg.json"


@dataclass
class TrainStepOutput:
    """What one training step computed; ``loss`` is the sum of ``losses`` (backward it)."""

    sae_in: Tensor  # [batch, d_in]
    sae_out: Tensor  # [batch, d_in]
    feature_acts: Tensor  # [batch, d_sae]
    hidden_pre: Tensor  # [batch, d_sae]
    loss: Tensor  # []
    losses: dict[str, Tensor]
    metrics: dict[str, Tensor | float | int | Callable[[], Tensor | float | int]] = field(
        default_factory=dict
    )


@dataclass
class TrainStepInput:
    """One step's batch, loss coefficients (after warm-up) and dead features ``[d_sae]``."""

    sae_in: Tensor  # [batch, d_in]
    coefficients: dict[str, float]
    dead_neuron_mask: Tensor | None
    n_training_steps: int
    is_logging_step: bool


class TrainCoefficientConfig(NamedTuple):
    """A loss coefficient and the steps over which it warms up linearly from 0."""

    value: float
    warm_up_steps: int


def mse_loss(preds: Tensor, target: Tensor) -> Tensor:
    """Elementwise squared error (summed over the last axis by the caller)."""
    return torch.nn.functional.mse_loss(preds, target, reduction="none")


@dataclass
class TrainingSAEConfig(SAEConfig):
    """The base of the training configs: an ``SAEConfig`` and ``decoder_init_norm``, the
    norm each decoder row starts at (None: Kaiming-uniform rows as they come)."""

    decoder_init_norm: float | None = 0.1

    def __new__(cls, *args: Any, **kwargs: Any) -> TrainingSAEConfig:
        if cls is TrainingSAEConfig:  # SAELens's base is abstract
            raise TypeError(
                "TrainingSAEConfig is a base class; build an architecture's config "
                "(StandardTrainingSAEConfig(...)) or TrainingSAEConfig.from_dict(d)."
            )
        return object.__new__(cls)

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> TrainingSAEConfig:
        """The training config of ``config_dict``'s architecture (``cls`` or a subclass);
        keys that are not its fields (a whole runner config's) are ignored."""
        cfg_class = cls
        if "architecture" in config_dict:
            cfg_class = get_sae_training_class(config_dict["architecture"])[1]
        if not issubclass(cfg_class, cls):
            raise ValueError(
                f"SAE config class {cls} does not match dict config class {cfg_class}; use "
                f"{cfg_class.__name__}.from_dict."
            )
        names = {f.name for f in dataclasses.fields(cfg_class)} - {"architecture"}
        kwargs = {k: v for k, v in config_dict.items() if k in names}
        if "metadata" in config_dict:
            kwargs["metadata"] = SAEMetadata(**config_dict["metadata"])
        return cfg_class(**kwargs)

    @classmethod
    def from_sae_runner_config(cls, cfg: Any) -> TrainingSAEConfig:
        """``cfg.sae`` with the runner's model, hook and context as its metadata."""
        if not isinstance(cfg.sae, cls):
            raise ValueError(
                f"SAE config class {cls} does not match SAE runner config class {type(cfg.sae)}"
            )
        metadata = SAEMetadata(
            model_name=cfg.model_name,
            hook_name=cfg.hook_name,
            hook_head_index=cfg.hook_head_index,
            context_size=cfg.context_size,
            prepend_bos=cfg.prepend_bos,
            seqpos_slice=cfg.seqpos_slice,
            model_from_pretrained_kwargs=cfg.model_from_pretrained_kwargs or {},
        )
        return dataclasses.replace(cfg.sae, metadata=metadata)

    def get_inference_config_class(self) -> type[SAEConfig]:
        """The config class the trained SAE is saved as (its architecture's)."""
        return get_sae_class(self.architecture())[1]

    def get_inference_sae_cfg_dict(self) -> dict[str, Any]:
        """This config as the inference config's dict (training fields left out)."""
        inference_class = self.get_inference_config_class()
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(inference_class)}
        out["architecture"] = inference_class.architecture()
        out["metadata"] = self.metadata.to_dict()
        return out


T_TRAINING_SAE_CONFIG = TypeVar("T_TRAINING_SAE_CONFIG", bound=TrainingSAEConfig)


class TrainingSAE(SAE):
    """An SAE that computes its training losses (see the module's docstring). Subclasses
    give ``encode_with_hidden_pre``, ``calculate_aux_loss`` and ``get_coefficients``."""

    def __init__(self, cfg: TrainingSAEConfig | dict[str, Any], use_error_term: bool = False):
        if isinstance(cfg, dict):
            cfg = TrainingSAEConfig.from_dict(cfg)
        super().__init__(cfg, use_error_term)
        # The activation store gives flat [batch, d_in] rows, also for hook_z.
        self.turn_off_forward_pass_hook_z_reshaping()
        self.mse_loss_fn = mse_loss

    def _check_config_class(self, cfg: SAEConfig) -> None:
        """A ``ValueError`` unless ``cfg``'s architecture trains this class or a subclass of
        it (a BatchTopK SAE may take a Matryoshka BatchTopK config, as in SAELens)."""
        own = get_sae_training_class(cfg.architecture)[0]
        if not (isinstance(self, own) or issubclass(own, type(self))):
            raise ValueError(
                f"{type(self).__name__} cannot take a {cfg.architecture!r} config; use "
                f"{own.__name__}."
            )

    def initialize_weights(self) -> None:
        """The inference SAE's weights, then decoder rows of norm ``cfg.decoder_init_norm``
        and ``W_enc = W_dec.T`` (Anthropic's heuristic initialisation)."""
        super().initialize_weights()
        if self.cfg.decoder_init_norm is not None:
            with torch.no_grad():
                self.W_dec.data /= self.W_dec.norm(dim=-1, keepdim=True)
                self.W_dec.data *= self.cfg.decoder_init_norm
            self.W_enc.data = self.W_dec.data.T.clone().detach().contiguous()

    # ------------------------------------------------------------- the subclass's part
    def get_coefficients(self) -> dict[str, float | TrainCoefficientConfig]:
        """The loss coefficients ``TrainStepInput.coefficients`` must give, by name."""
        raise NotImplementedError(f"{type(self).__name__} does not define get_coefficients.")

    def encode_with_hidden_pre(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(feature_acts, hidden_pre)``, both ``[..., d_sae]``."""
        raise NotImplementedError(f"{type(self).__name__} does not define encode_with_hidden_pre.")

    def calculate_aux_loss(
        self,
        step_input: TrainStepInput,
        feature_acts: Tensor,
        hidden_pre: Tensor,
        sae_out: Tensor,
    ) -> Tensor | dict[str, Tensor]:
        """The architecture's losses besides the MSE, by name."""
        raise NotImplementedError(f"{type(self).__name__} does not define calculate_aux_loss.")

    # ------------------------------------------------------------------ forward
    def encode(self, x: Tensor, hooked: bool = True) -> Tensor:
        """The features (``encode_with_hidden_pre``'s first output)."""
        if not hooked:
            with _disable_hooks(self):
                return self.encode_with_hidden_pre(x)[0]
        return self.encode_with_hidden_pre(x)[0]

    def decode(self, feature_acts: Tensor, hooked: bool = True) -> Tensor:
        """``feature_acts @ W_dec + b_dec``, hooked and denormalised."""
        if not hooked:
            with _disable_hooks(self):
                return self.decode(feature_acts)
        sae_out = self.hook_sae_recons(self._times_W_dec(feature_acts) + self.b_dec)
        sae_out = self.run_time_activation_norm_fn_out(sae_out)
        return self.reshape_fn_out(sae_out, self.d_head)

    def _times_W_dec(self, feature_acts: Tensor) -> Tensor:
        return feature_acts @ self.W_dec

    def training_forward_pass(self, step_input: TrainStepInput) -> TrainStepOutput:
        """Encode, decode and the losses of one batch (see the module's docstring)."""
        feature_acts, hidden_pre = self.encode_with_hidden_pre(step_input.sae_in)
        sae_out = self.decode(feature_acts)
        mse = self.mse_loss_fn(sae_out, step_input.sae_in).sum(dim=-1).mean()
        aux = self.calculate_aux_loss(
            step_input=step_input, feature_acts=feature_acts, hidden_pre=hidden_pre, sae_out=sae_out
        )
        losses = {"mse_loss": mse}
        if isinstance(aux, dict):
            losses.update(aux)
            total = mse
            for value in aux.values():
                total = total + value
        else:
            total = mse + aux
        return TrainStepOutput(
            sae_in=step_input.sae_in,
            sae_out=sae_out,
            feature_acts=feature_acts,
            hidden_pre=hidden_pre,
            loss=total,
            losses=losses,
        )

    # ------------------------------------------------------------------ saving
    def process_state_dict_for_saving_inference(self, state_dict: dict[str, Any]) -> None:
        """Turn the training weights into the inference SAE's (in place)."""
        self.process_state_dict_for_saving(state_dict)

    def save_inference_model(self, path: str | Path) -> tuple[Path, Path]:
        """Write the inference SAE (weights and config) into folder ``path``."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        state = self.state_dict()
        self.process_state_dict_for_saving_inference(state)
        weights, cfg_path = folder / SAE_WEIGHTS_FILENAME, folder / SAE_CFG_FILENAME
        save_file({k: v.contiguous() for k, v in state.items()}, str(weights))
        cfg_path.write_text(json.dumps(self.cfg.get_inference_sae_cfg_dict()))
        return weights, cfg_path

    def load_weights_from_checkpoint(self, checkpoint_path: Path | str) -> None:
        """Load ``sae_weights.safetensors`` of a checkpoint folder into this SAE."""
        state_dict = load_file(Path(checkpoint_path) / SAE_WEIGHTS_FILENAME)
        self.process_state_dict_for_loading(state_dict)
        self.load_state_dict(state_dict)

    @torch.no_grad()
    def log_histograms(self) -> dict[str, Any]:
        """Weights to log as histograms (numpy arrays), by name."""
        return {"weights/W_dec_norms": self.W_dec.detach().float().norm(dim=1).cpu().numpy()}

    # ------------------------------------------------------------------ classes
    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> TrainingSAE:
        """A new training SAE of ``config_dict``'s architecture."""
        sae_cls = cls.get_sae_class_for_architecture(config_dict["architecture"])
        return sae_cls(TrainingSAEConfig.from_dict(config_dict))

    @classmethod
    def get_sae_class_for_architecture(cls, architecture: str) -> type:
        sae_cls, _ = get_sae_training_class(architecture)
        if not issubclass(sae_cls, cls):
            raise ValueError(
                f"Loaded SAE is not of type {cls.__name__}. Use {sae_cls.__name__} instead."
            )
        return sae_cls

    @classmethod
    def get_sae_config_class_for_architecture(cls, architecture: str) -> type:
        return get_sae_training_class(architecture)[1]
