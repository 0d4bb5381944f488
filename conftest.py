"""The docstring examples' namespace (``python3 -m pytest --doctest-modules interp``, in CI).

Every ``Example:`` block runs on the models shipped with the package, offline. Besides the
module's own names, each example sees ``torch``, ``interp`` and a few shipped objects built
once: ``model`` (``attn-only-2l``, 512 symbols), ``tokens`` (BOS and a
random sequence of 10 repeated, [1, 21], whose repeat its induction head predicts) and ``cache``
(its activations). An example that needs anything else builds it in its own lines.
"""

from __future__ import annotations

import pytest

collect_ignore_glob = ["interp/**/__main__.py"]  # `python -m` entry points run on import


@pytest.fixture(autouse=True, scope="session")
def _doctest_globals(doctest_namespace: dict) -> None:
    import torch

    import interp

    torch.manual_seed(0)
    model = interp.load_model("attn-only-2l")
    bos = model.tokenizer.bos_token_id if model.tokenizer is not None else None
    tokens = interp.analysis.repeated_random_tokens(
        model.cfg.d_vocab, seq_len=10, bos_token_id=bos, seed=0
    )
    _, cache = model.run_with_cache(tokens)
    doctest_namespace.update(torch=torch, interp=interp, model=model, tokens=tokens, cache=cache)
