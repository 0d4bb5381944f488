"""SAELens's run configs at ``interp.sae.config`` against what SAELens 6.45.3 gives.

tests/sae_reference/make_runner_config_fixtures.py wrote ``runner_config/expected.json`` with
SAELens: each case's ``to_dict()``, step counts and trainer config, each error case's
exception, and the caching config's derived sizes. The same keyword arguments go to ours.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from interp.sae import StandardSAEConfig
from interp.sae.config import (
    DTYPE_MAP,
    CacheActivationsRunnerConfig,
    LanguageModelSAERunnerConfig,
    LoggingConfig,
    PretokenizeRunnerConfig,
    json_dict,
    special_token,
)
from interp.sae.registry import SAE_TRAINING_CLASS_REGISTRY

EXPECTED = json.loads(
    (Path(__file__).parents[1] / "sae_reference/runner_config/expected.json").read_text()
)


def runner(kwargs: dict, **extra) -> LanguageModelSAERunnerConfig:
    kwargs = {**EXPECTED["base"], **kwargs, **extra}
    kwargs["logger"] = LoggingConfig(**kwargs["logger"])
    if "seqpos_slice" in kwargs:
        kwargs["seqpos_slice"] = tuple(kwargs["seqpos_slice"])
    return LanguageModelSAERunnerConfig(sae=StandardSAEConfig(**EXPECTED["sae"]), **kwargs)


def cache(kwargs: dict) -> CacheActivationsRunnerConfig:
    kwargs = {**EXPECTED["cache_base"], **kwargs}
    if "seqpos_slice" in kwargs:
        kwargs["seqpos_slice"] = tuple(kwargs["seqpos_slice"])
    return CacheActivationsRunnerConfig(**kwargs)


def as_json(value: object) -> object:
    """What a JSON file would hold (tuples become lists), as the fixture does."""
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("case", sorted(EXPECTED["cases"]))
def test_runner_config_to_dict_matches_saelens(case):
    expected = EXPECTED["cases"][case]
    cfg = runner(expected["kwargs"])
    assert as_json(cfg.to_dict()) == expected["to_dict"]
    assert cfg.get_training_sae_cfg_dict() == cfg.sae.to_dict() == cfg.to_dict()["sae"]
    assert cfg.total_training_steps == expected["total_training_steps"]
    assert cfg.tokens_per_buffer == expected["tokens_per_buffer"]
    assert as_json(dataclasses.asdict(cfg.to_sae_trainer_config())) == expected["trainer"]


@pytest.mark.parametrize("case", sorted(EXPECTED["errors"]))
def test_runner_config_refuses_what_saelens_refuses(case):
    expected = EXPECTED["errors"][case]
    with pytest.raises(ValueError) as raised:
        runner(expected["kwargs"])
    assert type(raised.value).__name__ == expected["type"]
    assert str(raised.value) == expected["message"]


def test_unset_wandb_id_gives_a_fresh_checkpoint_folder_each_run():
    first, second = (runner({}, logger={}) for _ in range(2))
    assert first.checkpoint_path.startswith("checkpoints/")
    run_ids = {first.checkpoint_path.split("/")[1], second.checkpoint_path.split("/")[1]}
    assert len(run_ids) == 2
    assert all(len(run_id) == 8 and run_id.isalnum() for run_id in run_ids)


def test_hook_eval_is_deprecated():
    with pytest.warns(DeprecationWarning, match="hook_eval"):
        runner({}, hook_eval="blocks.0.hook_resid_pre")


def test_verbose_logs_the_run_sizes(caplog):
    with caplog.at_level(logging.INFO, logger="interp.sae.runner_config"):
        runner({}, verbose=True, training_tokens=40_960, train_batch_size_tokens=4096)
    assert "Total training steps: 10" in caplog.text
    assert "Run name: standard-32-LR-0.0003-Tokens-4.096e+04" in caplog.text


def test_from_dict_round_trips_through_the_training_registry(monkeypatch):
    # SAELens rebuilds ``sae`` with the training config class registered for its architecture.
    monkeypatch.setitem(SAE_TRAINING_CLASS_REGISTRY, "standard", (object, StandardSAEConfig))
    cfg = runner(EXPECTED["cases"]["custom"]["kwargs"])
    again = LanguageModelSAERunnerConfig.from_dict(cfg.to_dict())
    assert again.checkpoint_path == cfg.checkpoint_path == "ckpts/run7"  # no second run id
    assert again.to_dict() == cfg.to_dict()
    assert isinstance(again.logger, LoggingConfig) and isinstance(again.sae, StandardSAEConfig)


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ("sae", "sae field is required"),
        ("logger", "logger field is required"),
        ("architecture", "architecture field is required"),
    ],
)
def test_from_dict_names_the_missing_field(drop, message):
    cfg_dict = runner({}).to_dict()
    if drop == "architecture":
        del cfg_dict["sae"]["architecture"]
    else:
        del cfg_dict[drop]
    with pytest.raises(ValueError, match=message):
        LanguageModelSAERunnerConfig.from_dict(cfg_dict)


@pytest.mark.parametrize("case", sorted(EXPECTED["cache_cases"]))
def test_cache_config_sizes_match_saelens(case):
    expected = dict(EXPECTED["cache_cases"][case])
    cfg = cache(expected.pop("kwargs"))
    assert cfg.new_cached_activations_path == expected.pop("path")
    assert {name: getattr(cfg, name) for name in expected} == expected


@pytest.mark.parametrize("case", sorted(EXPECTED["cache_errors"]))
def test_cache_config_refuses_what_saelens_refuses(case):
    expected = EXPECTED["cache_errors"][case]
    with pytest.raises(ValueError) as raised:
        cache(expected["kwargs"])
    assert str(raised.value) == expected["message"]


def test_command_line_parsers():
    assert json_dict('{"a": 1}') == {"a": 1} and json_dict("null") is None
    with pytest.raises(ValueError, match="Expected a dictionary"):
        json_dict("[1]")
    assert [special_token(s) for s in ("None", "eos", "7")] == [None, "eos", 7]
    with pytest.raises(ValueError, match="'bos', 'eos', 'sep', an integer"):
        special_token("start")


def test_pretokenize_config_defaults_and_dtype_map():
    cfg = PretokenizeRunnerConfig()
    assert (cfg.begin_batch_token, cfg.sequence_separator_token, cfg.hf_num_shards) == (
        "bos",
        "bos",
        64,
    )
    assert DTYPE_MAP["torch.float64"] is DTYPE_MAP["float64"]
