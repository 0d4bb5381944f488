"""SAELens's training-run configuration (``sae_lens.config``): ``LanguageModelSAERunnerConfig``
with its ``LoggingConfig`` and the ``SAETrainerConfig`` it hands a trainer.

These are the configuration dataclasses only, with SAELens 6.45.3's fields, defaults,
derived values (``lr_end``, devices, a unique checkpoint folder...) and validation errors;
``interp.sae.train`` is interp's own trainer. ``sae`` is a training SAE config: anything with
``architecture()``, ``d_sae`` and ``to_dict()``; ``from_dict`` rebuilds it through the training
class registry (``interp.sae.registry.get_sae_training_class``).

Example:
    >>> from interp.sae import StandardSAEConfig
    >>> from interp.sae.config import LanguageModelSAERunnerConfig, LoggingConfig
    >>> cfg = LanguageModelSAERunnerConfig(
    ...     sae=StandardSAEConfig(d_in=8, d_sae=32), training_tokens=10_000,
    ...     train_batch_size_tokens=100, verbose=False, logger=LoggingConfig(wandb_id="run1"))
    >>> cfg.total_training_steps, cfg.lr_end, cfg.checkpoint_path, cfg.logger.run_name
    (100, 3e-05, 'checkpoints/run1', 'standard-32-LR-0.0003-Tokens-1.000e+04')
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import secrets
import string
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from interp.sae.metadata import SAELENS_VERSION
from interp.sae.registry import get_sae_training_class

if TYPE_CHECKING:
    from interp.sae.config import SAEConfig

__all__ = [
    "T_TRAINING_SAE_CONFIG",
    "LanguageModelSAERunnerConfig",
    "LoggingConfig",
    "SAETrainerConfig",
    "json_dict",
    "special_token",
]

logger = logging.getLogger(__name__)

T_TRAINING_SAE_CONFIG = TypeVar("T_TRAINING_SAE_CONFIG", bound="SAEConfig", covariant=True)

# The alphabet and length of wandb.util.generate_id, which SAELens uses for run ids.
_ID_ALPHABET = string.digits + string.ascii_lowercase
_ID_LENGTH = 8


def json_dict(s: str) -> Any:
    """A JSON object given on a command line (``None`` allowed); anything else is an error."""
    parsed = json.loads(s)
    if parsed is not None and not isinstance(parsed, dict):
        raise ValueError(f"Expected a dictionary, got {type(parsed)}")
    return parsed


def special_token(s: str) -> Any:
    """A special-token setting from a string: ``"bos"``/``"eos"``/``"sep"``, an id, or ``None``."""
    if s.lower() == "none":
        return None
    if s in ("bos", "eos", "sep"):
        return s
    try:
        return int(s)
    except ValueError:
        raise ValueError(f"Expected 'bos', 'eos', 'sep', an integer, or 'none', got {s}") from None


def _generate_run_id() -> str:
    """A random 8-character run id (as ``wandb.util.generate_id`` makes)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


@dataclass
class LoggingConfig:
    """Where a training run logs: Weights & Biases switches, project, run name and frequency."""

    log_to_wandb: bool = True
    log_activations_store_to_wandb: bool = False
    log_optimizer_state_to_wandb: bool = False
    log_weights_to_wandb: bool = True
    wandb_project: str = "sae_lens_training"
    wandb_id: str | None = None
    run_name: str | None = None
    wandb_entity: str | None = None
    wandb_log_frequency: int = 10
    eval_every_n_wandb_logs: int = 100

    def log(
        self,
        trainer: Any,
        weights_path: Path | str,
        cfg_path: Path | str,
        sparsity_path: Path | str | None,
        wandb_aliases: list[str] | None = None,
    ) -> None:
        """Upload a trainer's saved SAE (weights, config) and its feature sparsity to W&B."""
        import wandb  # only a run that logs needs it

        # W&B artifact names allow only [A-Za-z0-9_.-]: "sae_google/gemma-2b" is refused.
        sae_name = trainer.sae.get_name().replace("/", "__")
        model_artifact = wandb.Artifact(sae_name, type="model", metadata=dict(trainer.cfg.__dict__))
        if self.log_weights_to_wandb:
            model_artifact.add_file(str(weights_path))
        model_artifact.add_file(str(cfg_path))
        wandb.log_artifact(model_artifact, aliases=wandb_aliases)
        sparsity_artifact = wandb.Artifact(
            f"{sae_name}_log_feature_sparsity",
            type="log_feature_sparsity",
            metadata=dict(trainer.cfg.__dict__),
        )
        if sparsity_path is not None:
            sparsity_artifact.add_file(str(sparsity_path))
        wandb.log_artifact(sparsity_artifact)


@dataclass
class SAETrainerConfig:
    """What a trainer reads of a run: sample counts, optimiser schedule, checkpoints, logging."""

    total_training_samples: int
    train_batch_size_samples: int
    lr: float = 3e-4
    lr_end: float | None = None
    lr_scheduler_name: str = "constant"
    lr_warm_up_steps: int = 0
    lr_decay_steps: int = 0
    n_restart_cycles: int = 1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    device: str = "cpu"
    autocast: bool = False
    dead_feature_window: int = 1000
    feature_sampling_window: int = 2000
    n_checkpoints: int = 0
    checkpoint_path: str | None = None
    save_final_checkpoint: bool = False
    logger: LoggingConfig = field(default_factory=lambda: LoggingConfig(log_to_wandb=False))
    n_batches_for_norm_estimate: int = 1000

    @property
    def total_training_steps(self) -> int:
        return self.total_training_samples // self.train_batch_size_samples


def default_cached_activations_path(
    dataset_path: str, model_name: str, hook_name: str, hook_head_index: int | None
) -> str:
    """``activations/<dataset>/<model>/<hook>[_<head>]`` with ``/`` in names made ``_``."""
    dataset, model = dataset_path.replace("/", "_"), model_name.replace("/", "_")
    path = f"activations/{dataset}/{model}/{hook_name}"
    return path if hook_head_index is None else f"{path}_{hook_head_index}"


def validate_seqpos(seqpos: tuple[int | None, ...], context_size: int) -> None:
    """Refuse a ``seqpos_slice`` whose step is below 2 when given, or that keeps no position."""
    if len(seqpos) == 3:
        step_size = seqpos[2] or 1
        if step_size <= 1:
            raise ValueError(
                f"Ensure the step_size={seqpos[2]} for sequence slicing is at least 1."
            )
    if len(range(context_size)[slice(*seqpos)]) == 0:
        raise ValueError(
            f"The slice {seqpos} results in an empty range. "
            "Please adjust your seqpos or context_size."
        )


@dataclass
class LanguageModelSAERunnerConfig(Generic[T_TRAINING_SAE_CONFIG]):
    """A run training the SAE ``sae`` on a language model's activations (SAELens's fields).

    After construction: ``lr_end`` defaults to ``lr / 10``, ``llm_device`` and
    ``act_store_device`` to ``device`` (``"with_model"``: the LLM's), ``checkpoint_path`` gets
    a unique id appended (``logger.wandb_id`` or a random one), ``logger.run_name`` defaults
    to ``<architecture>-<d_sae>-LR-<lr>-Tokens-<training_tokens>`` and
    ``tokens_per_buffer`` is set. See SAELens's documentation for each field.
    """

    sae: T_TRAINING_SAE_CONFIG

    # The model and the data it reads
    model_name: str = "gelu-2l"
    model_class_name: str = "HookedTransformer"
    hook_name: str = "blocks.0.hook_mlp_out"
    hook_eval: str = "NOT_IN_USE"  # deprecated by SAELens; warns when set
    hook_head_index: int | None = None
    dataset_path: str = ""
    dataset_trust_remote_code: bool = True
    streaming: bool = True
    is_dataset_tokenized: bool = True
    use_chat_formatting: bool = False
    context_size: int = 128
    use_cached_activations: bool = False
    cached_activations_path: str | None = None  # default: default_cached_activations_path
    from_pretrained_path: str | None = None

    # Activation store
    n_batches_in_buffer: int = 20
    training_tokens: int = 2_000_000
    store_batch_size_prompts: int = 32
    seqpos_slice: tuple[int | None, ...] = (None,)
    disable_concat_sequences: bool = False
    sequence_separator_token: int | Literal["bos", "eos", "sep"] | None = "bos"
    activations_mixing_fraction: float = 0.5

    # Devices, seed, dtype
    device: str = "cpu"
    llm_device: str | None = None
    act_store_device: str | None = None
    prefetch_llm_batches: bool | int = False
    seed: int = 42
    dtype: str = "float32"
    prepend_bos: bool = True

    # Performance
    autocast: bool = False
    autocast_lm: bool = False
    compile_llm: bool = False
    llm_compilation_mode: str | None = None
    compile_sae: bool = False
    sae_compilation_mode: str | None = None

    # Optimisation
    train_batch_size_tokens: int = 4096
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    lr: float = 3e-4
    lr_scheduler_name: str = "constant"  # constant, cosineannealing, cosineannealingwarmrestarts
    lr_warm_up_steps: int = 0
    lr_end: float | None = None
    lr_decay_steps: int = 0
    n_restart_cycles: int = 1

    # Dead features
    dead_feature_window: int = 1000
    feature_sampling_window: int = 2000
    dead_feature_threshold: float = 1e-8

    # Evals and logging
    n_eval_batches: int = 10
    eval_batch_size_prompts: int | None = None
    logger: LoggingConfig = field(default_factory=LoggingConfig)

    # Outputs and checkpoints
    n_checkpoints: int = 0
    checkpoint_path: str | None = "checkpoints"
    save_final_checkpoint: bool = False
    output_path: str | None = "output"
    resume_from_checkpoint: str | None = None

    # Misc
    verbose: bool = True
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    model_from_pretrained_kwargs: dict[str, Any] | None = None
    sae_lens_version: str = SAELENS_VERSION
    sae_lens_training_version: str = SAELENS_VERSION
    exclude_special_tokens: bool | list[int] = False
    n_batches_for_norm_estimate: int = 1000

    def __post_init__(self) -> None:
        if self.hook_eval != "NOT_IN_USE":
            warnings.warn(
                "The 'hook_eval' field is deprecated and will be removed in v7.0.0. "
                "It is not currently used and can be safely removed from your config.",
                DeprecationWarning,
                stacklevel=2,
            )
        if self.use_chat_formatting and self.is_dataset_tokenized:
            raise ValueError(
                "use_chat_formatting and is_dataset_tokenized cannot both be True. "
                "Chat formatting requires raw conversation data."
            )
        if self.use_cached_activations and self.cached_activations_path is None:
            self.cached_activations_path = default_cached_activations_path(
                self.dataset_path, self.model_name, self.hook_name, self.hook_head_index
            )
        self.tokens_per_buffer = (
            self.train_batch_size_tokens * self.context_size * self.n_batches_in_buffer
        )
        if self.logger.run_name is None:
            self.logger.run_name = self._run_name()
        if self.model_from_pretrained_kwargs is None:
            hooked = self.model_class_name == "HookedTransformer"
            self.model_from_pretrained_kwargs = {"center_writing_weights": False} if hooked else {}
        self._resolve_devices()
        if self.lr_end is None:
            self.lr_end = self.lr / 10
        run_id = self.logger.wandb_id if self.logger.wandb_id is not None else _generate_run_id()
        self.checkpoint_path = f"{self.checkpoint_path}/{run_id}"
        if self.verbose:
            self._log_summary()
        self._validate()

    def _run_name(self) -> str:
        return (
            f"{self.sae.architecture()}-{self.sae.d_sae}-LR-{self.lr}"
            f"-Tokens-{self.training_tokens:3.3e}"
        )

    def _resolve_devices(self) -> None:
        if self.llm_device is None:
            self.llm_device = self.device
        if self.act_store_device is None:
            self.act_store_device = self.device
        elif self.act_store_device == "with_model":
            self.act_store_device = self.llm_device
        # 0 / False disable prefetching; only a negative queue size is an error.
        prefetch = self.prefetch_llm_batches
        if not isinstance(prefetch, bool) and prefetch < 0:
            raise ValueError(
                "prefetch_llm_batches must be a bool or a non-negative int "
                f"(0 / False disables prefetching), got {prefetch}"
            )

    def _validate(self) -> None:
        if self.context_size < 0:
            raise ValueError(
                f"The provided context_size is {self.context_size} is negative. "
                "Expecting positive context_size."
            )
        validate_seqpos(seqpos=self.seqpos_slice, context_size=self.context_size)
        excluded = self.exclude_special_tokens
        if isinstance(excluded, list) and not all(isinstance(x, int) for x in excluded):
            raise ValueError("exclude_special_tokens list must contain only integers")

    def _log_summary(self) -> None:
        """Log the run's sizes (buffer, steps, sampling windows), as SAELens does when verbose."""
        steps = self.total_training_steps
        contexts_per_buffer = self.store_batch_size_prompts * self.n_batches_in_buffer
        logger.info("Run name: %s", self._run_name())
        logger.info(
            "n_tokens_per_buffer (millions): %s", contexts_per_buffer * self.context_size / 10**6
        )
        logger.info(
            "Lower bound: n_contexts_per_buffer (millions): %s", contexts_per_buffer / 10**6
        )
        logger.info("Total training steps: %s", steps)
        logger.info("Total wandb updates: %s", steps // self.logger.wandb_log_frequency)
        window_tokens = self.context_size * self.train_batch_size_tokens / 10**6
        logger.info(
            "n_tokens_per_feature_sampling_window (millions): %s",
            self.feature_sampling_window * window_tokens,
        )
        logger.info(
            "n_tokens_per_dead_feature_window (millions): %s",
            self.dead_feature_window * window_tokens,
        )
        logger.info(
            "We will reset the sparsity calculation %s times.",
            steps // self.feature_sampling_window,
        )
        logger.info(
            "Number tokens in sparsity calculation window: %.2e",
            self.feature_sampling_window * self.train_batch_size_tokens,
        )

    @property
    def total_training_tokens(self) -> int:
        return self.training_tokens

    @property
    def total_training_steps(self) -> int:
        return self.total_training_tokens // self.train_batch_size_tokens

    def get_training_sae_cfg_dict(self) -> dict[str, Any]:
        """The SAE config's own ``to_dict()``."""
        return self.sae.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data (``sae`` and ``logger`` as dicts; devices and dtype as str)."""
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)}
        out["sae"] = self.sae.to_dict()
        out["logger"] = dataclasses.asdict(self.logger)
        for name in ("dtype", "device", "llm_device", "act_store_device"):
            out[name] = str(getattr(self, name))
        return out

    @classmethod
    def from_dict(cls, cfg_dict: dict[str, Any]) -> LanguageModelSAERunnerConfig[Any]:
        """The config ``to_dict`` gave, ``checkpoint_path`` kept as written (no new id)."""
        if "sae" not in cfg_dict:
            raise ValueError("sae field is required in the config dictionary")
        if "architecture" not in cfg_dict["sae"]:
            raise ValueError("architecture field is required in the sae dictionary")
        if "logger" not in cfg_dict:
            raise ValueError("logger field is required in the config dictionary")
        sae_config_class = get_sae_training_class(cfg_dict["sae"]["architecture"])[1]
        sae_cfg = sae_config_class.from_dict(cfg_dict["sae"])
        logger_cfg = LoggingConfig(**cfg_dict["logger"])
        output = cls(**{**cfg_dict, "sae": sae_cfg, "logger": logger_cfg})
        # __post_init__ appended a run id; the dict's path already has one.
        if "checkpoint_path" in cfg_dict:
            output.checkpoint_path = cfg_dict["checkpoint_path"]
        return output

    def to_sae_trainer_config(self) -> SAETrainerConfig:
        """The part of this run a trainer reads."""
        return SAETrainerConfig(
            n_checkpoints=self.n_checkpoints,
            checkpoint_path=self.checkpoint_path,
            save_final_checkpoint=self.save_final_checkpoint,
            total_training_samples=self.total_training_tokens,
            device=self.device,
            autocast=self.autocast,
            lr=self.lr,
            lr_end=self.lr_end,
            lr_scheduler_name=self.lr_scheduler_name,
            lr_warm_up_steps=self.lr_warm_up_steps,
            adam_beta1=self.adam_beta1,
            adam_beta2=self.adam_beta2,
            lr_decay_steps=self.lr_decay_steps,
            n_restart_cycles=self.n_restart_cycles,
            train_batch_size_samples=self.train_batch_size_tokens,
            dead_feature_window=self.dead_feature_window,
            feature_sampling_window=self.feature_sampling_window,
            logger=self.logger,
            n_batches_for_norm_estimate=self.n_batches_for_norm_estimate,
        )
