"""TransformerLens's rough evals: a sanity-check loss, induction loss, the IOI task, and the
loss on hub text datasets.

``sanity_check``, ``induction_loss``, ``IOIDataset`` and ``ioi_eval`` run offline. The
``make_*_data_loader`` functions (and ``evaluate``, which runs them all) download a dataset
from the Hugging Face hub with the ``datasets`` package, so they need the network (or a copy
already in the ``datasets`` cache); without it they say so.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from interp.model import lm_cross_entropy_loss
from interp.utils.tokens import encode_text, tokenize_and_concatenate


def sanity_check(model: Any) -> Tensor:
    """The loss on one paragraph (the start of *Circuits: Zoom In*): below about 5 the model is
    probably fine, above 7 something is wrong.

    Example:
        >>> from interp.config import HookedTransformerConfig
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=128, d_head=8)
        >>> untrained = interp.HookedTransformer(cfg, tokenizer=interp.get_tokenizer("gpt2"))
        >>> bool(sanity_check(untrained) > 7)   # random weights: about ln(50257) = 10.8
        True
    """
    text = (
        "Many important transition points in the history of science have been moments when "
        "science 'zoomed in.' At these points, we develop a visualization or tool that allows us "
        "to see the world in a new level of detail, and a new field of science develops to study "
        "the world through this lens."
    )
    return model(text, return_type="loss")


def _load_hub_dataset(loader: str, name: str, *args: Any) -> Any:
    try:
        from datasets import load_dataset
    except ImportError as error:
        raise ImportError(
            f"{loader} reads the {name!r} dataset with the `datasets` package: "
            "pip install datasets."
        ) from error
    try:
        return load_dataset(name, *args, split="train")
    except (ConnectionError, OSError) as error:
        raise ConnectionError(
            f"{loader} downloads the {name!r} dataset from the Hugging Face hub, which needs the "
            "network (or a copy already in the datasets cache). Offline, use induction_loss or "
            f"ioi_eval instead, or build a DataLoader from your own text with "
            f"tokenize_and_concatenate. ({type(error).__name__}: {error})"
        ) from error


def _hub_data_loader(
    loader: str, tokenizer: Any, batch_size: int, name: str, *args: Any, column: str = "text"
) -> DataLoader:
    data = _load_hub_dataset(loader, name, *args)
    dataset = tokenize_and_concatenate(data, tokenizer, column_name=column)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)


def make_wiki_data_loader(tokenizer: Any, batch_size: int = 8) -> DataLoader:
    """Wikitext-2 (train split) in rows of 1024 tokens; needs the network."""
    return _hub_data_loader(
        "make_wiki_data_loader", tokenizer, batch_size, "wikitext", "wikitext-2-v1"
    )


def make_owt_data_loader(tokenizer: Any, batch_size: int = 8) -> DataLoader:
    """10k OpenWebText documents (GPT-2's training distribution); needs the network."""
    return _hub_data_loader("make_owt_data_loader", tokenizer, batch_size, "stas/openwebtext-10k")


def make_pile_data_loader(tokenizer: Any, batch_size: int = 8) -> DataLoader:
    """The first 10k texts of the Pile; needs the network."""
    return _hub_data_loader("make_pile_data_loader", tokenizer, batch_size, "NeelNanda/pile-10k")


def make_code_data_loader(tokenizer: Any, batch_size: int = 8) -> DataLoader:
    """CodeParrot's Python validation set; needs the network."""
    return _hub_data_loader(
        "make_code_data_loader",
        tokenizer,
        batch_size,
        "codeparrot/codeparrot-valid-v2-near-dedup",
        column="content",
    )


DATASET_NAMES = ["wiki", "owt", "pile", "code"]
DATASET_LOADERS: list[Callable[..., DataLoader]] = [
    make_wiki_data_loader,
    make_owt_data_loader,
    make_pile_data_loader,
    make_code_data_loader,
]


def _device(model: Any, device: torch.device | str | None) -> torch.device:
    return torch.device(device) if device is not None else next(model.parameters()).device


@torch.inference_mode()
def evaluate_on_dataset(
    model: Any, data_loader: DataLoader, truncate: int = 100, device: str | None = None
) -> float:
    """The mean loss over the first ``truncate + 1`` batches of ``data_loader`` (batches hold
    ``"tokens"``). ``device`` defaults to the model's (TransformerLens defaults to "cuda")."""
    device = _device(model, device)
    running_loss, total = 0.0, 0
    for batch in tqdm(data_loader):
        running_loss += model(batch["tokens"].to(device), return_type="loss").mean().item()
        total += 1
        if total > truncate:
            break
    return running_loss / total


@torch.inference_mode()
def induction_loss(
    model: Any,
    tokenizer: Any = None,
    batch_size: int = 4,
    subseq_len: int = 384,
    prepend_bos: bool | None = None,
    device: str | None = None,
) -> Tensor:
    """The loss on the second half of random token sequences repeated twice: low when the
    model has induction heads. Tokens are drawn from ``[100, 20000)`` as in TransformerLens
    (from the vocabulary's lower half on models with fewer tokens); with ``prepend_bos`` (the
    config's default) the first token is replaced by BOS.

    Example:
        >>> bool(induction_loss(interp.load_model("attn-only-2l"), subseq_len=30) < 1)
        True
    """
    device = _device(model, device)
    high = min(20000, model.cfg.d_vocab)
    low = min(100, high // 2)
    first_half = torch.randint(low, high, (batch_size, subseq_len)).to(device)
    repeated = first_half.repeat(1, 2)  # [batch, 2 * subseq_len]
    if prepend_bos is None:
        prepend_bos = model.cfg.default_prepend_bos
    if prepend_bos:
        tokenizer = model.tokenizer if tokenizer is None else tokenizer
        if tokenizer is None or tokenizer.bos_token_id is None:
            raise ValueError(
                "induction_loss with prepend_bos needs a tokenizer with a BOS token; pass "
                "tokenizer=, or prepend_bos=False."
            )
        repeated[:, 0] = tokenizer.bos_token_id
    logits = model(repeated, return_type="logits")
    per_token = lm_cross_entropy_loss(logits, repeated, per_token=True)
    return per_token[:, subseq_len + 1 :].mean()


@torch.inference_mode()
def evaluate(
    model: Any, truncate: int = 100, batch_size: int = 8, tokenizer: Any = None
) -> dict[str, float]:
    """The loss on each hub dataset above (``{"wiki_loss": ..., ...}``); needs the network."""
    tokenizer = model.tokenizer if tokenizer is None else tokenizer
    losses = {}
    for name, make_loader in zip(DATASET_NAMES, DATASET_LOADERS, strict=True):
        loss = evaluate_on_dataset(
            model, make_loader(tokenizer=tokenizer, batch_size=batch_size), truncate=truncate
        )
        print(f"{name}: {loss}")
        losses[f"{name}_loss"] = loss
    return losses


class IOIDataset(Dataset):
    """Indirect-object-identification prompts ("... John gave the milk to Mary"), as
    TransformerLens builds them: each item holds the ``"prompt"`` token ids (ending with the
    indirect object), and the ``"IO"`` and ``"S"`` names' ids (with a leading space).

    Example:
        >>> dataset = IOIDataset(interp.get_tokenizer("gpt2"), num_samples=4, seed=42)
        >>> dataset.samples[0]
        {'text': 'Mary and John went to the store to buy bread. John handed the bread to Mary',
         'IO': ' Mary', 'S': ' John'}
        >>> dataset[0]["prompt"].shape   # GPT-2 token ids
        torch.Size([18])
    """

    def __init__(
        self,
        tokenizer: Any,
        templates: list[str] | None = None,
        names: list[str] | None = None,
        nouns: dict[str, list[str]] | None = None,
        num_samples: int = 1000,
        symmetric: bool = False,
        prepend_bos: bool = True,
        seed: int | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.prepend_bos = prepend_bos
        if prepend_bos and tokenizer.bos_token_id is None:
            raise ValueError("prepend_bos=True needs a tokenizer with a BOS token.")
        if seed is not None:
            random.seed(seed)  # the global generator, as TransformerLens (same samples)
        self.templates = templates if templates is not None else self.get_default_templates()
        self.names = names if names is not None else self.get_default_names()
        self.nouns = nouns if nouns is not None else self.get_default_nouns()
        if len(self.names) < 2:
            raise ValueError(f"IOI needs at least two names to choose from, got {self.names}.")
        self.samples: list[dict[str, str]] = []
        for _ in range(num_samples // 2 if symmetric else num_samples):
            self.samples.extend(self.get_sample(symmetric=symmetric))

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, idx: int) -> dict[str, Tensor]:
        sample = self.samples[idx]
        prompt = encode_text(self.tokenizer, sample["text"])
        if self.prepend_bos:
            prompt = [self.tokenizer.bos_token_id] + prompt
        return {
            "prompt": torch.LongTensor(prompt),
            "IO": torch.LongTensor(encode_text(self.tokenizer, sample["IO"])),
            "S": torch.LongTensor(encode_text(self.tokenizer, sample["S"])),
        }

    def get_sample(self, symmetric: bool = False) -> list[dict[str, str]]:
        """One template filled with random nouns and two distinct names (both orders when
        ``symmetric``)."""
        template = random.choice(self.templates)
        for noun_type, noun_list in self.nouns.items():
            template = template.replace(f"[{noun_type}]", random.choice(noun_list))
        first, second = random.sample(self.names, 2)
        orders = [(first, second), (second, first)] if symmetric else [(first, second)]
        return [
            {
                "text": template.replace("[A]", a).replace("[B]", b),
                "IO": " " + a,
                "S": " " + b,
            }
            for a, b in orders
        ]

    @staticmethod
    def get_default_names() -> list[str]:
        return ["John", "Mary"]

    @staticmethod
    def get_default_templates() -> list[str]:
        return [
            "[A] and [B] went to the [LOCATION] to buy [OBJECT]. [B] handed the [OBJECT] to [A]",
            "Then, [B] and [A] went to the [LOCATION]. [B] gave the [OBJECT] to [A]",
        ]

    @staticmethod
    def get_default_nouns() -> dict[str, list[str]]:
        return {"LOCATION": ["store", "market"], "OBJECT": ["milk", "eggs", "bread"]}


def _collate_ioi(samples: list[dict[str, Tensor]]) -> dict[str, Any]:
    prompts = [sample["prompt"] for sample in samples]
    return {
        "prompt": torch.nn.utils.rnn.pad_sequence(prompts, batch_first=True),  # right-padded
        "IO": [sample["IO"] for sample in samples],
        "S": [sample["S"] for sample in samples],
        "prompt_length": [p.shape[0] for p in prompts],
    }


@torch.inference_mode()
def ioi_eval(
    model: Any,
    dataset: Dataset | None = None,
    batch_size: int = 8,
    num_samples: int = 1000,
    tokenizer: Any = None,
    symmetric: bool = False,
) -> dict[str, float]:
    """The mean logit difference (indirect object minus subject, at the first token where the
    two names differ) and the accuracy (difference > 0) on the IOI task.

    Example:
        >>> from interp.config import HookedTransformerConfig
        >>> gpt2 = interp.get_tokenizer("gpt2")   # GPT-2 small scores about 3.1 and 0.9
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=64, d_head=8)
        >>> untrained = interp.HookedTransformer(cfg, tokenizer=gpt2)   # random: near 0, 0.5
        >>> sorted(ioi_eval(untrained, IOIDataset(gpt2, num_samples=4, seed=42)))
        ['Accuracy', 'Logit Difference']
    """
    tokenizer = model.tokenizer if tokenizer is None else tokenizer
    if dataset is None:
        dataset = IOIDataset(tokenizer, num_samples=num_samples, symmetric=symmetric)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, collate_fn=_collate_ioi)
    total_correct, total_logit_diff = 0, 0.0
    for batch in tqdm(loader):
        batch_logits = model(batch["prompt"], return_type="logits")
        for i in range(batch_logits.shape[0]):
            io, s = batch["IO"][i], batch["S"][i]
            prefix_length = batch["prompt_length"][i] - io.shape[0]
            n = min(io.shape[0], s.shape[0])
            differs = torch.nonzero(io[:n] != s[:n])
            if len(differs) == 0:
                raise ValueError(
                    f"IOI sample {i} of a batch has identical names (IO={io.tolist()}, "
                    f"S={s.tolist()}): the names must tokenize differently."
                )
            start = int(differs[0])
            logits = batch_logits[i, prefix_length + start - 1]
            logit_diff = logits[io[start]] - logits[s[start]]
            total_correct += int(logit_diff > 0)
            total_logit_diff += logit_diff.item()
    return {
        "Logit Difference": total_logit_diff / len(dataset),
        "Accuracy": total_correct / len(dataset),
    }
