"""The package's import layers (pyproject.toml's [tool.importlinter] contracts) hold, and the
pieces that keep them: the loaders build the class they are handed (from_pretrained's cls),
and the command line's shared helpers live below the command line."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import build_model
from interp.model import HookedTransformer

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> list[str]:
    """The lint-imports command next to this Python, or run through it."""
    script = Path(sys.executable).with_name("lint-imports")
    if script.is_file():
        return [str(script)]
    found = shutil.which("lint-imports")
    return [found] if found else [sys.executable, "-m", "importlinter.cli"]


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter", reason="needs import-linter (the test extra)")
    done = subprocess.run(
        [*_lint_imports(), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_loaders_build_the_class_they_are_handed():
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=8, n_heads=2, d_head=4, d_mlp=16, d_vocab=11, n_ctx=5, act_fn="relu"
    )
    source = HookedTransformer(cfg)

    class Subclass(HookedTransformer):
        pass

    for model_class in (HookedTransformer, Subclass):
        built = build_model(cfg, source.state_dict().items(), model_class=model_class)
        assert type(built) is model_class
        for name, tensor in source.state_dict().items():
            assert torch.equal(built.state_dict()[name], tensor), name


def test_the_loaders_keep_no_model_class_of_their_own():
    """No import-time registry: interp.loading holds no reference to interp.model's class."""
    import interp.loading.checkpoint as checkpoint

    assert not hasattr(checkpoint, "model_class")
    with pytest.raises(ModuleNotFoundError):
        __import__("interp.loading.model_class")


def test_command_line_helpers_stay_importable_from_interp_cli():
    from interp import cli
    from interp.cli import support
    from interp.shipped import by_name

    assert cli.load_named_model is by_name.load_named_model
    assert cli.UsageError is support.UsageError
    assert cli.CommandError is support.CommandError
    assert cli.terminal_text is support.terminal_text


def test_every_part_of_the_package_is_in_a_layer():
    """Each module and package directly under interp/ is named by the layers contract."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    named = {
        part.strip() for layer in contract["layers"] for part in layer.replace(":", "|").split("|")
    }
    package = ROOT / "interp"
    parts = {
        f"interp.{path.stem}"
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem not in ("__init__", "__main__"))
        or (path.is_dir() and (path / "__init__.py").is_file())
    }
    assert parts <= named, sorted(parts - named)


def test_unknown_model_is_a_value_error_naming_the_closest_shipped_model():
    from interp.shipped.by_name import UnknownModelError, load_named_model

    with pytest.raises(UnknownModelError, match="did you mean 'attn-only-2l'"):
        load_named_model("attn-only-2")
    assert issubclass(UnknownModelError, ValueError)
