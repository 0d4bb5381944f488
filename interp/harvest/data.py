"""The harvest's input: a file or folder read as documents (plain text, JSON lines, Parquet, a
Hugging Face ``datasets`` folder) or as token ids (.npy, .pt, .safetensors, a ``datasets``
folder with a ``tokens``/``input_ids`` column), turned into one deterministic stream of
fixed-length sequences.

Documents are packed as TransformerLens's ``tokenize_and_concatenate`` packs them
(``interp.utils.tokenize_and_concatenate``): joined by EOS, cut into rows of ``seq_len``
tokens (BOS first when the model prepends one), a chunk at a time (up to 1,000 documents or
about a million characters, as its ``Dataset.map`` batches), dropping each chunk's tail. A
tokenizer without an EOS token (a character tokenizer) joins documents with nothing between
them. Plain text is read in blocks of about a million characters ending at a line break,
each block one document.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interp.tokenizers import tokenizer_to_dict
from interp.utils.tokens import encode_text, tokenize_and_concatenate

DOCS_PER_CHUNK = 1000  # TransformerLens packs per Dataset.map batch, 1,000 rows by default
CHARS_PER_CHUNK = 1 << 20
TEXT_SUFFIXES = (".txt", ".text", ".md")
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
TOKEN_SUFFIXES = (".npy", ".pt", ".safetensors")
TOKEN_COLUMNS = ("tokens", "input_ids")


@dataclass(frozen=True)
class Source:
    """One input file (or ``datasets`` folder) and how to read it."""

    path: Path
    kind: str  # "text", "jsonl", "parquet", "datasets", "tokens"

    def identity(self) -> dict[str, Any]:
        """What the manifest records to tell one input from another: path, kind and size."""
        size = sum(f.stat().st_size for f in _files(self.path)) if self.path.is_dir() else None
        return {
            "path": str(self.path),
            "kind": self.kind,
            "bytes": size if size is not None else self.path.stat().st_size,
        }


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _kind(path: Path) -> str | None:
    suffix = _suffix(path)
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in JSON_SUFFIXES:
        return "jsonl"
    if suffix == ".parquet":
        return "parquet"
    if suffix in TOKEN_SUFFIXES:
        return "tokens"
    return None


def _is_datasets_folder(path: Path) -> bool:
    return (
        path.is_dir() and (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
    )


def find_sources(data: str | Path) -> list[Source]:
    """The inputs under ``data``, in a fixed order: the file itself, a ``datasets`` folder
    saved with ``save_to_disk``, or every readable file of a folder (recursively, sorted).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "b.txt").write_text("Hello.")
        >>> _ = (folder / "a.jsonl").write_text('{"text": "Hi."}')
        >>> [(source.path.name, source.kind) for source in find_sources(folder)]
        [('a.jsonl', 'jsonl'), ('b.txt', 'text')]
    """
    path = Path(data)
    if not path.exists():
        raise FileNotFoundError(f"--data {str(path)!r} does not exist; give a file or a folder.")
    if path.is_dir() and (path / "dataset_dict.json").is_file():
        splits = json.loads((path / "dataset_dict.json").read_text()).get("splits", [])
        raise ValueError(
            f"{str(path)!r} is a DatasetDict with splits {splits}; give one split's folder, "
            f"e.g. --data {path / (splits[0] if splits else 'train')}."
        )
    if _is_datasets_folder(path):
        return [Source(path, "datasets")]
    if path.is_file():
        kind = _kind(path)
        if kind is None:
            raise ValueError(
                f"Cannot read {str(path)!r}: its extension is not one of "
                f"{TEXT_SUFFIXES + JSON_SUFFIXES + ('.parquet',) + TOKEN_SUFFIXES} (optionally "
                ".gz for text and JSON lines)."
            )
        return [Source(path, kind)]
    sources = []
    for folder, subfolders, files in os.walk(path):
        subfolders.sort()
        here = Path(folder)
        if _is_datasets_folder(here):
            sources.append(Source(here, "datasets"))
            subfolders.clear()
            continue
        for name in sorted(files):
            kind = _kind(here / name)
            if kind is not None:
                sources.append(Source(here / name, kind))
    return sources


# --------------------------------------------------------------------------- documents
def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix.lower() == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def _text_blocks(path: Path) -> Iterator[str]:
    with _open_text(path) as file:
        pending = ""
        while True:
            block = file.read(CHARS_PER_CHUNK)
            if not block:
                break
            block = pending + block
            cut = block.rfind("\n") + 1
            if cut == 0:
                pending = block
                continue
            pending = block[cut:]
            yield block[:cut]
        if pending:
            yield pending


def _field(record: Any, text_field: str, where: str) -> str:
    if not isinstance(record, dict) or text_field not in record:
        keys = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise KeyError(
            f"{where} has no text field {text_field!r} (its fields: {keys}); pass "
            "--text-field NAME (text_field=) naming the field that holds the text."
        )
    text = record[text_field]
    if not isinstance(text, str):
        raise TypeError(f"{where}: field {text_field!r} is a {type(text).__name__}, not text.")
    return text


def _jsonl_documents(path: Path, text_field: str) -> Iterator[str]:
    with _open_text(path) as file:
        for number, line in enumerate(file, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number} is not JSON: {error}") from error
                yield _field(record, text_field, f"{path}:{number}")


def _check_column(names: list[str], text_field: str, where: str) -> None:
    if text_field not in names:
        raise KeyError(
            f"{where} has no text field {text_field!r} (its columns: {sorted(names)}); pass "
            "--text-field NAME (text_field=) naming the column that holds the text."
        )


def _parquet_documents(path: Path, text_field: str) -> Iterator[str]:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    _check_column(file.schema_arrow.names, text_field, str(path))
    for batch in file.iter_batches(batch_size=DOCS_PER_CHUNK, columns=[text_field]):
        yield from batch.column(0).to_pylist()


def _load_datasets_folder(path: Path) -> Any:
    import datasets

    return datasets.load_from_disk(str(path))


def _datasets_token_column(dataset: Any) -> str | None:
    return next((c for c in TOKEN_COLUMNS if c in dataset.column_names), None)


def _datasets_documents(path: Path, text_field: str) -> Iterator[str]:
    dataset = _load_datasets_folder(path)
    _check_column(dataset.column_names, text_field, str(path))
    for start in range(0, len(dataset), DOCS_PER_CHUNK):
        yield from dataset[start : start + DOCS_PER_CHUNK][text_field]


def documents(source: Source, text_field: str) -> Iterator[str]:
    """The documents of a text source, in order."""
    if source.kind == "text":
        return _text_blocks(source.path)
    if source.kind == "jsonl":
        return _jsonl_documents(source.path, text_field)
    if source.kind == "parquet":
        return _parquet_documents(source.path, text_field)
    return _datasets_documents(source.path, text_field)


def _chunks(docs: Iterator[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    chars = 0
    for doc in docs:
        chunk.append(doc)
        chars += len(doc)
        if len(chunk) >= DOCS_PER_CHUNK or chars >= CHARS_PER_CHUNK:
            yield chunk
            chunk, chars = [], 0
    if chunk:
        yield chunk


def pack_chunk(texts: list[str], tokenizer: Any, seq_len: int, add_bos: bool) -> np.ndarray:
    """One chunk of documents as rows [n, seq_len] of token ids; the tail is dropped (also a
    chunk shorter than one row, which ``tokenize_and_concatenate`` would pad)."""
    room = seq_len - 1 if add_bos else seq_len
    if tokenizer.eos_token_id is None:
        ids = np.asarray(encode_text(tokenizer, "".join(texts)), dtype=np.int64)
        n_rows = len(ids) // room
        rows = ids[: n_rows * room].reshape(n_rows, room)
        if add_bos:
            rows = np.concatenate([np.full((n_rows, 1), tokenizer.bos_token_id), rows], axis=1)
        return rows
    rows = tokenize_and_concatenate(texts, tokenizer, max_length=seq_len, add_bos_token=add_bos)
    rows = rows["tokens"].numpy()
    if len(rows) == 1:  # a chunk under one row comes back padded: drop it
        n_tokens = sum(len(encode_text(tokenizer, t)) for t in texts) + len(texts) - 1
        if n_tokens < room:
            return rows[:0]
    return rows


# ------------------------------------------------------------------------------ tokens
def _load_token_array(path: Path) -> np.ndarray | torch.Tensor:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, mmap_mode="r")
    if suffix == ".pt":
        value = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(value, dict):
            key = next((k for k in TOKEN_COLUMNS if k in value), None)
            if key is None:
                raise KeyError(f"{path} holds keys {sorted(value)}; name the ids 'tokens'.")
            value = value[key]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{path} holds a {type(value).__name__}, not a tensor of token ids.")
        return value
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as file:
        keys = list(file.keys())
        key = next((k for k in TOKEN_COLUMNS if k in keys), keys[0] if len(keys) == 1 else None)
        if key is None:
            raise KeyError(f"{path} holds tensors {keys}; name the token ids 'tokens'.")
        return file.get_tensor(key)


def token_rows(source: Source, seq_len: int) -> Iterator[np.ndarray]:
    """Rows of pre-tokenised ids, [n, seq_len] a block: a 2-D array's rows (their width must
    be ``seq_len``), or a 1-D array cut into rows as it is (no BOS added)."""
    if source.kind == "datasets":
        dataset = _load_datasets_folder(source.path)
        column = _datasets_token_column(dataset)
        for start in range(0, len(dataset), DOCS_PER_CHUNK):
            block = np.asarray(dataset[start : start + DOCS_PER_CHUNK][column], dtype=np.int64)
            _check_width(block, seq_len, source.path)
            yield block
        return
    array = _load_token_array(source.path)
    if array.ndim == 1:
        n_rows = array.shape[0] // seq_len
        array = array[: n_rows * seq_len].reshape(n_rows, seq_len)
    elif array.ndim != 2:
        raise ValueError(f"{source.path} holds ids of shape {tuple(array.shape)}; give 1-D or 2-D.")
    _check_width(array, seq_len, source.path)
    if (
        array.dtype.is_floating_point
        if isinstance(array, torch.Tensor)
        else array.dtype.kind == "f"
    ):
        raise TypeError(f"{source.path} holds floats ({array.dtype}), not integer token ids.")
    for start in range(0, array.shape[0], DOCS_PER_CHUNK):
        block = array[start : start + DOCS_PER_CHUNK]
        yield np.array(block.numpy() if isinstance(block, torch.Tensor) else block, dtype=np.int64)


def _check_width(rows: Any, seq_len: int, path: Path) -> None:
    if rows.ndim != 2 or rows.shape[1] != seq_len:
        raise ValueError(
            f"{path} holds rows of {rows.shape[1] if rows.ndim == 2 else '?'} token ids but "
            f"the sequence length is {seq_len}; pass --seq-len {rows.shape[-1]} (seq_len=)."
        )


def token_width(source: Source) -> int | None:
    """The row width of a 2-D pre-tokenised source (its natural ``seq_len``), else None."""
    if source.kind == "datasets":
        dataset = _load_datasets_folder(source.path)
        column = _datasets_token_column(dataset)
        return len(dataset[0][column]) if column and len(dataset) else None
    if source.kind != "tokens":
        return None
    array = _load_token_array(source.path)
    return int(array.shape[1]) if array.ndim == 2 else None


def is_tokenised(source: Source) -> bool:
    if source.kind == "tokens":
        return True
    if source.kind == "datasets":
        return _datasets_token_column(_load_datasets_folder(source.path)) is not None
    return False


def sequences(
    sources: list[Source], tokenizer: Any, seq_len: int, add_bos: bool, text_field: str
) -> Iterator[np.ndarray]:
    """Every source's sequences in order, as blocks of rows [n, seq_len] (int64).

    Args:
        sources: the inputs, from ``find_sources``.
        tokenizer: the model's tokenizer (text sources only).
        seq_len: the tokens in each sequence.
        add_bos: whether each row starts with BOS (when the model prepends one).
        text_field: the field of a JSON-lines or Parquet record that holds the text.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = path.write_text("To be, or not to be. " * 20)
        >>> chars = interp.load_model("shakespeare-char").tokenizer
        >>> next(sequences(find_sources(path), chars, 64, False, "text")).shape   # 440 // 64
        (6, 64)
    """
    for source in sources:
        if is_tokenised(source):
            yield from token_rows(source, seq_len)
            continue
        for chunk in _chunks(documents(source, text_field)):
            rows = pack_chunk(chunk, tokenizer, seq_len, add_bos)
            if len(rows):
                yield rows


def tokenizer_identity(tokenizer: Any) -> dict[str, Any]:
    """The tokenizer's name, special ids and a sha256 of its vocabulary (for the manifest)."""
    vocabulary: Any = tokenizer_to_dict(tokenizer)
    if vocabulary is None and hasattr(tokenizer, "get_vocab"):
        vocabulary = sorted(tokenizer.get_vocab().items())
    elif vocabulary is None:
        vocabulary = [tokenizer.convert_id_to_token(i) for i in range(len(tokenizer))]
    blob = json.dumps(vocabulary, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return {
        "name": str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__)),
        "vocab_size": len(tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "vocab_sha256": hashlib.sha256(blob).hexdigest(),
    }
