"""The tokenizer a Hugging Face checkpoint folder holds: which files it may be in, reading it
with ``transformers``, and an error naming the file when one of them is corrupt."""

from __future__ import annotations

import json
from pathlib import Path

from interp.tokenizers import HuggingFaceTokenizer

# The files a Hugging Face checkpoint folder may hold its tokenizer in.
HF_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
)


def tokenizer_from_folder(folder: str | Path) -> HuggingFaceTokenizer | None:
    """The Hugging Face tokenizer saved in a checkpoint folder (``AutoTokenizer``, else the
    bare ``tokenizer.json`` as a ``PreTrainedTokenizerFast``), wrapped; None when the folder
    has no tokenizer files.

    Example:
        >>> import tempfile
        >>> from tokenizers import Tokenizer, models, pre_tokenizers
        >>> saved = Tokenizer(models.WordLevel({"Hello": 0, "world": 1, "[UNK]": 2}, "[UNK]"))
        >>> saved.pre_tokenizer = pre_tokenizers.Whitespace()
        >>> folder = Path(tempfile.mkdtemp()); saved.save(str(folder / "tokenizer.json"))
        >>> tokenizer_from_folder(folder).encode("Hello world", add_special_tokens=False)
        [0, 1]
        >>> tokenizer_from_folder(tempfile.mkdtemp()) is None   # no tokenizer files
        True
    """
    folder = Path(folder)
    if not any((folder / name).is_file() for name in HF_TOKENIZER_FILES):
        return None
    try:
        import transformers
    except ImportError:
        raise ImportError(
            f"{folder} holds a Hugging Face tokenizer, which needs transformers: pip install "
            "transformers, or pass tokenizer= yourself."
        ) from None
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if (folder / name).is_file():
            json_error = _json_problem(folder / name)
            if json_error:
                raise ValueError(_bad_tokenizer_file(folder / name, json_error))
    try:
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    except ImportError:  # a tokenizer that needs another package (sentencepiece): say so
        raise
    except Exception as error:  # the tokenizers library raises a bare Exception for a bad file
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise ValueError(
                f"{folder} holds tokenizer files that transformers cannot read "
                f"({type(error).__name__}: {error}); fix or remove them, or pass tokenizer= "
                "yourself."
            ) from None
        try:
            hf_tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
        except Exception as bare_error:
            problem = _json_problem(path) or f"the tokenizers library cannot read it ({bare_error})"
            raise ValueError(_bad_tokenizer_file(path, problem)) from None
    return HuggingFaceTokenizer(hf_tokenizer)


def _json_problem(path: Path) -> str:
    """What keeps ``path`` from being a JSON object ("" when it is one)."""
    try:
        value = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    except json.JSONDecodeError as error:
        return f"it is not valid JSON ({error})"
    if not isinstance(value, dict):
        return f"it holds a JSON {type(value).__name__}, not an object"
    return ""


def _bad_tokenizer_file(path: Path, problem: str) -> str:
    return (
        f"{path} is not a valid tokenizer file: {problem}. Restore it from the checkpoint's "
        "source (or save the tokenizer again with save_pretrained), or pass tokenizer= to "
        "load the model with another tokenizer."
    )
