"""Write what SAELens 6.45.3's run configs give, for tests/sae/test_sae_saelens_config.py.

Run with SAELens installed (see make_fixtures.py for the venv):

    /tmp/saelens-venv/bin/python tests/sae_reference/make_runner_config_fixtures.py

For each case in CASES (keyword arguments of ``LanguageModelSAERunnerConfig`` around a
``StandardSAEConfig(d_in=8, d_sae=32)``, with a fixed ``wandb_id`` so the checkpoint path is
known) it records ``to_dict()``, ``total_training_steps``, ``tokens_per_buffer`` and
``to_sae_trainer_config()``; for each of ERROR_CASES the exception's type and message; and the
same for ``CacheActivationsRunnerConfig`` (CACHE_CASES, CACHE_ERROR_CASES). Writes
``runner_config/expected.json``. The test file reads the cases from that file.
"""

import dataclasses
import json
from pathlib import Path

from sae_lens.config import (
    CacheActivationsRunnerConfig,
    LanguageModelSAERunnerConfig,
    LoggingConfig,
)
from sae_lens.saes.standard_sae import StandardSAEConfig

HERE = Path(__file__).parent
SAE = {"d_in": 8, "d_sae": 32}
BASE = {"verbose": False, "logger": {"wandb_id": "fixedid"}}
CASES = {
    "defaults": {},
    "custom": {
        "lr": 1e-3,
        "training_tokens": 123_456,
        "train_batch_size_tokens": 512,
        "context_size": 64,
        "n_batches_in_buffer": 8,
        "use_cached_activations": True,
        "dataset_path": "org/data",
        "model_name": "org/model",
        "hook_name": "blocks.1.attn.hook_z",
        "hook_head_index": 2,
        "device": "cpu",
        "llm_device": "cuda:0",
        "act_store_device": "with_model",
        "model_class_name": "HookedMamba",
        "seqpos_slice": [2, -2],
        "exclude_special_tokens": [0, 1],
        "prefetch_llm_batches": 2,
        "checkpoint_path": "ckpts",
        "logger": {"wandb_id": "run7", "run_name": "mine", "wandb_log_frequency": 5},
    },
    "lr_end_and_cache_path": {
        "lr": 2e-4,
        "lr_end": 1e-5,
        "use_cached_activations": True,
        "cached_activations_path": "my/acts",
        "act_store_device": "cpu",
        "model_from_pretrained_kwargs": {"n_devices": 1},
        "seqpos_slice": [None, None, 2],
    },
}
ERROR_CASES = {
    "chat_and_tokenized": {"use_chat_formatting": True, "is_dataset_tokenized": True},
    "negative_context": {"context_size": -1},
    "seqpos_step_one": {"seqpos_slice": [0, 10, 1]},
    "seqpos_empty": {"seqpos_slice": [200, None]},
    "exclude_not_ints": {"exclude_special_tokens": [1, "a"]},
    "negative_prefetch": {"prefetch_llm_batches": -1},
}
CACHE_BASE = {
    "dataset_path": "org/data",
    "model_name": "org/model",
    "model_batch_size": 4,
    "hook_name": "blocks.0.hook_resid_post",
    "d_in": 16,
    "training_tokens": 100_000,
    "context_size": 64,
    "device": "cpu",
}
CACHE_CASES = {
    "plain": {"buffer_size_gb": 0.001},
    "sliced_half": {"buffer_size_gb": 0.0005, "seqpos_slice": [1, -1], "dtype": "bfloat16"},
}
CACHE_ERROR_CASES = {
    "chat_without_context": {"use_chat_formatting": True, "context_size": -1},
    "context_over_tokens": {"context_size": 64, "training_tokens": 10},
    "seqpos_empty": {"seqpos_slice": [64, None]},
}
CACHE_PROPERTIES = [
    "sliced_context_size",
    "bytes_per_token",
    "n_tokens_in_buffer",
    "n_tokens_in_batch",
    "n_batches_in_buffer",
    "n_seq_in_dataset",
    "n_seq_in_buffer",
    "n_buffers",
]


def runner(kwargs):
    kwargs = {**BASE, **kwargs}
    kwargs["logger"] = LoggingConfig(**kwargs["logger"])
    if "seqpos_slice" in kwargs:
        kwargs["seqpos_slice"] = tuple(kwargs["seqpos_slice"])
    return LanguageModelSAERunnerConfig(sae=StandardSAEConfig(**SAE), **kwargs)


def cache(kwargs):
    kwargs = {**CACHE_BASE, **kwargs}
    if "seqpos_slice" in kwargs:
        kwargs["seqpos_slice"] = tuple(kwargs["seqpos_slice"])
    return CacheActivationsRunnerConfig(**kwargs)


def error_of(build, kwargs):
    try:
        build(kwargs)
    except Exception as error:  # noqa: BLE001 - recording what SAELens raises
        return {"type": type(error).__name__, "message": str(error)}
    raise AssertionError(f"{kwargs} did not raise")


def main():
    expected = {"sae": SAE, "base": BASE, "cases": {}, "errors": {}}
    for name, kwargs in CASES.items():
        cfg = runner(kwargs)
        expected["cases"][name] = {
            "kwargs": kwargs,
            "to_dict": cfg.to_dict(),
            "total_training_steps": cfg.total_training_steps,
            "tokens_per_buffer": cfg.tokens_per_buffer,
            "trainer": dataclasses.asdict(cfg.to_sae_trainer_config()),
        }
    for name, kwargs in ERROR_CASES.items():
        expected["errors"][name] = {"kwargs": kwargs, **error_of(runner, kwargs)}
    expected["cache_base"] = CACHE_BASE
    expected["cache_cases"] = {
        name: {
            "kwargs": kwargs,
            "path": cache(kwargs).new_cached_activations_path,
            **{prop: getattr(cache(kwargs), prop) for prop in CACHE_PROPERTIES},
        }
        for name, kwargs in CACHE_CASES.items()
    }
    expected["cache_errors"] = {
        name: {"kwargs": kwargs, **error_of(cache, kwargs)}
        for name, kwargs in CACHE_ERROR_CASES.items()
    }
    out = HERE / "runner_config" / "expected.json"
    out.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
