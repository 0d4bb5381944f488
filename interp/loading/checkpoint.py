"""Reading checkpoint files safely and lean, checking them, and building a model from them.

Every loader (Hugging Face, nanoGPT, TransformerLens) goes through here:

- files are read with a safetensors reader or ``torch.load(weights_only=True)``, never a
  plain unpickle; a pickle that would run code is refused;
- a checkpoint's names and shapes are checked against what the model needs before any
  weight is read, so an error lists every missing or unexpected key and every shape
  mismatch, and no model is left half-loaded;
- the model is built on the meta device (no memory, no random initialisation) and takes the
  converted tensors as its parameters, each read once and placed straight on the target
  device in the target dtype, so loading peaks near 1x the model's size instead of 2x.
"""

from __future__ import annotations

import json
import pickle
import re
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from interp.components.tl_buffers import (
    check_model_tl_buffers,
    tl_buffer_keys,
    weights_state_dict,
)
from interp.config import HookedTransformerConfig
from interp.utils.devices import check_device
from interp.utils.dtypes import parse_dtype

Shape = tuple[int, ...]
# Ranges [start, stop) along one axis of a tensor: the part of it that one process reads.
Ranges = list[tuple[int, int]]
ReadSlice = Callable[[str, int, Ranges], Tensor]

_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


# The dtypes a model computes in; ``dtype=`` of every loader takes one of them (or its name).
MODEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: corrupt, unsafe, or not matching the model."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(value: Any) -> str:
    """``str(value)`` with control characters escaped (``\\n``, ``\\x1b``), so a file or model
    name can never rewrite the terminal an error message is printed on.

    Example:
        >>> print(printable("evil\\x1b[2Jname"))
        evil\\x1b[2Jname
    """
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], str(value))


def read_config_json(path: str | Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a checkpoint's config.json), or a clear error naming it.

    Example:
        >>> import json, tempfile
        >>> path = Path(tempfile.mkdtemp()) / "config.json"
        >>> _ = path.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768}))
        >>> read_config_json(path)["n_embd"]
        768
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{printable(path)} does not exist.")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(
            f"{printable(path)} is not valid JSON ({error}); restore it from the checkpoint's "
            "source or save the model again."
        ) from None
    if not isinstance(config, dict):
        raise CheckpointError(
            f"{printable(path)} holds a JSON {type(config).__name__}, not an object of config "
            "fields; restore it from the checkpoint's source or save the model again."
        )
    return config


def non_finite_values(tensor: Tensor) -> str:
    """How many NaN and infinite values a floating-point tensor holds ("3 NaN values"), or ""
    for none; one pass over the tensor (a min and max, which NaN and infinities reach) in
    the common case that it has none.

    Example:
        >>> non_finite_values(torch.tensor([1.0, float("nan"), float("inf")]))
        '1 NaN value and 1 infinite value'
    """
    if not tensor.is_floating_point() or tensor.is_meta or tensor.numel() == 0:
        return ""
    low, high = torch.aminmax(tensor)
    if bool(torch.isfinite(low) & torch.isfinite(high)):
        return ""
    counts = [(int(torch.isnan(tensor).sum()), "NaN"), (int(torch.isinf(tensor).sum()), "infinite")]
    return " and ".join(
        f"{count} {kind} value{'s' if count > 1 else ''}" for count, kind in counts if count
    )


class TensorSource:
    """The tensors of a checkpoint by name: their shapes up front, their data read on demand.

    ``take(name)`` reads one tensor and lets the source forget it, so a loader that converts
    tensors one at a time never holds two copies of the weights. ``take_slice(name, dim,
    ranges)`` reads only the given ranges along ``dim``, concatenated (a tensor-parallel
    process's heads or neurons); a file-backed source reads no other bytes of it.

    Example:
        >>> source = TensorSource.from_state_dict({"w": torch.zeros(2, 3)})
        >>> source.shapes, source.take("w").shape
        ({'w': (2, 3)}, torch.Size([2, 3]))
    """

    def __init__(
        self,
        shapes: dict[str, Shape],
        read: Callable[[str], Tensor],
        check_values: bool = False,
        read_slice: ReadSlice | None = None,
    ) -> None:
        self.shapes = shapes
        self._read = read
        self._read_slice = read_slice
        self._check_values = check_values
        self.non_finite: dict[str, str] = {}  # name: "3 NaN values", for the tensors taken

    def take(self, name: str) -> Tensor:
        """Tensor ``name``; a source that checks values (one reading a file or a state dict)
        also notes in ``non_finite`` how many NaN and infinite values it holds."""
        return self._checked(name, self._read(name))

    def take_slice(self, name: str, dim: int, ranges: Ranges) -> Tensor:
        """Ranges ``[start, stop)`` of tensor ``name`` along ``dim``, concatenated (a copy of
        its own). A source without a slice reader reads the tensor, then slices it.

        Example:
            >>> source = TensorSource.from_state_dict({"w": torch.arange(6).view(2, 3)})
            >>> source.take_slice("w", 1, [(0, 1), (2, 3)])
            tensor([[0, 2],
                    [3, 5]])
        """
        if self._read_slice is not None:
            return self._checked(name, self._read_slice(name, dim, ranges))
        return self._checked(name, slice_ranges(self._read(name), dim, ranges))

    def _checked(self, name: str, tensor: Tensor) -> Tensor:
        if self._check_values:
            problem = non_finite_values(tensor)
            if problem:
                self.non_finite[name] = problem
        return tensor

    def warn_non_finite(self, what: str) -> None:
        """One warning naming every tensor taken so far that holds NaN or infinite values."""
        if not self.non_finite:
            return
        listed = "; ".join(f"{name} has {problem}" for name, problem in self.non_finite.items())
        warnings.warn(
            f"{what} holds weights that are not finite: {listed}. The model loads them as they "
            "are, so every output that depends on them will be NaN or infinite: the file is "
            "corrupt or its training diverged; load an earlier checkpoint or download it again.",
            stacklevel=3,
        )

    @classmethod
    def from_state_dict(cls, state_dict: dict[str, Tensor]) -> TensorSource:
        """A source over an in-memory state dict; taking a tensor drops the dict's reference."""
        state_dict = dict(state_dict)
        for name, value in state_dict.items():
            if not isinstance(value, Tensor):
                raise CheckpointError(
                    f"Entry {name!r} of the state dict is a {type(value).__name__}, not a tensor."
                )
        shapes = {name: tuple(tensor.shape) for name, tensor in state_dict.items()}

        def read_slice(name: str, dim: int, ranges: Ranges) -> Tensor:
            return slice_ranges(state_dict.pop(name), dim, ranges)

        return cls(shapes, state_dict.pop, check_values=True, read_slice=read_slice)

    @classmethod
    def from_safetensors(cls, paths: Iterable[str | Path]) -> TensorSource:
        """A source over one or more ``.safetensors`` files (the shards of one checkpoint).

        Each tensor is read with plain file reads straight into its own buffer. (Reading
        through a memory map, as ``safetensors.safe_open`` does, keeps every page it touched
        resident until the file is closed, which would double the peak memory of a load.)
        """
        entries: dict[str, tuple[Path, int, torch.dtype, Shape, int]] = {}
        for path in map(Path, paths):
            for name, entry in _read_safetensors_header(path).items():
                if name in entries:
                    raise CheckpointError(
                        f"Tensor {name!r} appears in two shards ({printable(path)})."
                    )
                entries[name] = entry

        def read(name: str) -> Tensor:
            path, offset, dtype, shape, n_bytes = entries[name]
            tensor = torch.empty(shape, dtype=dtype)
            with open(path, "rb") as file:
                file.seek(offset)
                n_read = file.readinto(tensor.view(-1).view(torch.uint8).numpy())
            if n_read != n_bytes:
                raise CheckpointError(
                    f"{printable(path)} is truncated: tensor {name!r} is incomplete. Download or "
                    "copy it again."
                )
            return tensor

        def read_slice(name: str, dim: int, ranges: Ranges) -> Tensor:
            path, offset, dtype, shape, _ = entries[name]
            return _read_file_slice(path, offset, dtype, shape, dim, ranges, name)

        shapes = {name: entry[3] for name, entry in entries.items()}
        return cls(shapes, read, check_values=True, read_slice=read_slice)

    @classmethod
    def from_torch_files(cls, paths: Iterable[str | Path]) -> TensorSource:
        """A source over one or more ``torch.save`` files (``pytorch_model.bin`` and its
        shards), streamed a shard at a time: each file is memory-mapped (its tensors' shapes
        are known, no data read), a tensor taken is copied out of its map, and a shard's map
        is dropped once all of its tensors are taken, so the pages read stay resident for one
        shard at most. (A legacy-format file cannot be mapped: it is read whole.)"""
        shards: dict[Path, dict[str, Tensor]] = {}
        owners: dict[str, Path] = {}
        for path in map(Path, paths):
            state_dict = load_torch_file(path, mmap=True)
            if not isinstance(state_dict, dict):
                raise CheckpointError(
                    f"{printable(path)} holds a {type(state_dict).__name__}, not a state dict "
                    "of tensors."
                )
            for name, value in state_dict.items():
                if not isinstance(value, Tensor):
                    raise CheckpointError(
                        f"Entry {name!r} of {printable(path)} is a {type(value).__name__}, not a "
                        "tensor."
                    )
                if name in owners:
                    raise CheckpointError(
                        f"Tensor {name!r} appears in two shards ({printable(path)})."
                    )
                owners[name] = path
            shards[path] = state_dict
        shapes = {name: tuple(shards[path][name].shape) for name, path in owners.items()}

        def read(name: str) -> Tensor:
            path = owners.pop(name)
            shard = shards[path]
            tensor = shard.pop(name).clone()  # out of the map: the model never aliases the file
            if not shard:
                del shards[path]  # its map is closed with its last tensor
            return tensor

        def read_slice(name: str, dim: int, ranges: Ranges) -> Tensor:
            path = owners.pop(name)
            shard = shards[path]
            tensor = slice_ranges(shard.pop(name), dim, ranges)  # only its pages are read
            if not shard:
                del shards[path]
            return tensor

        return cls(shapes, read, check_values=True, read_slice=read_slice)


def slice_ranges(tensor: Tensor, dim: int, ranges: Ranges) -> Tensor:
    """``tensor``'s ``ranges`` along ``dim``, concatenated into a tensor of its own."""
    return torch.cat([tensor.narrow(dim, start, stop - start) for start, stop in ranges], dim)


def _read_file_slice(
    path: Path, offset: int, dtype: torch.dtype, shape: Shape, dim: int, ranges: Ranges, name: str
) -> Tensor:
    """Ranges of a tensor stored row-major at byte ``offset`` of ``path``, read with plain file
    reads of those bytes alone: one read per range for each index of the axes before ``dim``
    (a weight's rows: one read per range; its columns: one per row and range)."""
    outer = int(torch.Size(shape[:dim]).numel())
    inner = int(torch.Size(shape[dim + 1 :]).numel()) * dtype.itemsize  # bytes per step of dim
    width = sum(stop - start for start, stop in ranges)
    out = torch.empty((*shape[:dim], width, *shape[dim + 1 :]), dtype=dtype)
    buffer = out.view(-1).view(torch.uint8).numpy()
    position = 0
    with open(path, "rb") as file:
        for index in range(outer):
            for start, stop in ranges:
                n_bytes = (stop - start) * inner
                file.seek(offset + (index * shape[dim] + start) * inner)
                if file.readinto(buffer[position : position + n_bytes]) != n_bytes:
                    raise CheckpointError(
                        f"{printable(path)} is truncated: tensor {name!r} is incomplete. "
                        "Download or copy it again."
                    )
                position += n_bytes
    return out


def _read_safetensors_header(path: Path) -> dict[str, tuple[Path, int, torch.dtype, Shape, int]]:
    """Each tensor's (file, byte offset, dtype, shape, byte count), after checking the file."""
    if not path.is_file():
        raise FileNotFoundError(f"Checkpoint file {printable(path)} does not exist.")
    file_size = path.stat().st_size
    corrupt = f"{printable(path)} is not a valid safetensors file (truncated or corrupt)"
    with open(path, "rb") as file:
        prefix = file.read(8)
        header_size = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if not 0 < header_size <= file_size - 8:
            raise CheckpointError(f"{corrupt}: its header length is wrong.")
        try:
            header = json.loads(file.read(header_size))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CheckpointError(f"{corrupt}: its header is not JSON ({error}).") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{corrupt}: its header is not a JSON object.")
    header.pop("__metadata__", None)
    data_start, data_size = 8 + header_size, file_size - 8 - header_size
    entries = {}
    for name, info in header.items():
        try:
            dtype = _SAFETENSORS_DTYPES[info["dtype"]]
            shape = tuple(int(size) for size in info["shape"])
            begin, end = (int(offset) for offset in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{corrupt}: tensor {name!r} has a malformed entry.") from None
        n_bytes = dtype.itemsize * int(torch.Size(shape).numel())
        if end - begin != n_bytes or begin < 0:
            raise CheckpointError(f"{corrupt}: tensor {name!r} has inconsistent offsets.")
        if end > data_size:
            raise CheckpointError(
                f"{printable(path)} is truncated: tensor {name!r} ends at byte "
                f"{data_start + end} but the file has {file_size} bytes. Download or copy it again."
            )
        entries[name] = (path, data_start + begin, dtype, shape, n_bytes)
    return entries


# torch.save's legacy (pre-1.6, non-zip) format starts with a pickled magic number.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C.to_bytes(10, "little")


def load_torch_file(path: str | Path, mmap: bool = False) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU, with clear errors.

    Both of ``torch.save``'s formats load: the zip format and the legacy one of torch < 1.6
    (``_use_new_zipfile_serialization=False``). A pickle holding anything but tensors and
    plain containers (which could run code when unpickled) is refused. ``mmap=True`` maps a
    zip-format file instead of reading it, so parts never used (a nanoGPT checkpoint's
    optimizer state) cost no memory.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "ckpt.pt"   # as nanoGPT's train.py writes it
        >>> torch.save({"model": {"w": torch.ones(2)}, "iter_num": 10}, path)
        >>> state_dict = load_torch_file(path, mmap=True)["model"]
        >>> state_dict["w"]
        tensor([1., 1.])
    """
    path = Path(path)
    name = printable(path)
    if not path.is_file():
        raise FileNotFoundError(f"Checkpoint file {name} does not exist.")
    with open(path, "rb") as file:
        prefix = file.read(16)
    legacy = prefix[:1] == b"\x80" and prefix[2:4] == b"\x8a\x0a" and prefix[4:14] == _LEGACY_MAGIC
    if not legacy and not zipfile.is_zipfile(path):
        if prefix.startswith(b"PK\x03\x04"):
            raise CheckpointError(
                f"{name} is truncated or corrupt: it starts as torch.save's zip format but its "
                "zip directory is missing or damaged. Download or copy it again."
            )
        raise CheckpointError(
            f"{name} is not a PyTorch checkpoint (neither torch.save's zip format nor its legacy "
            f"format; it starts with bytes {prefix[:8]!r}). It is corrupt or another kind of "
            "file: download or copy it again."
        )
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and not legacy)
    except pickle.UnpicklingError as error:
        detail = str(error)
        unsafe = re.search(r"Unsupported global: (.*?) was not an allowed global", detail)
        if not unsafe:
            raise CheckpointError(
                f"{name} is not a readable PyTorch checkpoint (truncated or corrupt): "
                f"{printable(detail.splitlines()[0])} Download or copy it again."
            ) from None
        raise CheckpointError(
            f"Refused to load {name}: it holds Python objects other than tensors and plain "
            f"containers ({printable(unsafe.group(1))}), and unpickling them could run arbitrary "
            "code. If you trust its source, load it yourself with torch.load(..., "
            "weights_only=False) and pass the resulting state dict, or convert it to safetensors."
        ) from None
    except Exception as error:  # a damaged file fails anywhere inside torch's unpickler
        raise CheckpointError(
            f"{name} is not a readable PyTorch checkpoint (truncated or corrupt?): "
            f"{type(error).__name__}: {printable(error)}. Download or copy it again."
        ) from None


def check_names_and_shapes(
    found: dict[str, Shape], expected: dict[str, Shape], what: str, hint: str = ""
) -> None:
    """Raise one ``CheckpointError`` listing every missing key, unexpected key and shape mismatch.

    Args:
        found: the checkpoint's tensor names and shapes.
        expected: the model's.
        what: the checkpoint as the message names it.
        hint: a sentence added to the message (how to fix it).

    Example:
        >>> check_names_and_shapes({"w": (2, 3)}, {"w": (3, 2)}, "my checkpoint")
        Traceback (most recent call last):
        ...
        interp.loading.checkpoint.CheckpointError: my checkpoint does not fit the model:
        shape mismatches: w: checkpoint (2, 3), model (3, 2)
    """
    missing = [name for name in expected if name not in found]
    unexpected = [name for name in found if name not in expected]
    mismatched = [
        f"{name}: checkpoint {tuple(found[name])}, model {tuple(expected[name])}"
        for name in expected
        if name in found and tuple(found[name]) != tuple(expected[name])
    ]
    problems = []
    if missing:
        problems.append(f"missing keys {missing}")
    if unexpected:
        problems.append(f"unexpected keys {unexpected}")
    if mismatched:
        problems.append("shape mismatches: " + "; ".join(mismatched))
    if problems:
        message = f"{what} does not fit the model: " + ", ".join(problems)
        raise CheckpointError(message + (f". {hint}" if hint else ""))


def check_model_dtype(dtype: torch.dtype, what: str) -> torch.dtype:
    """``dtype`` if a model can compute in it (``MODEL_DTYPES``), else a ``ValueError`` saying
    ``what`` it is (``"dtype=torch.int8"``) and listing the allowed ones."""
    if dtype not in MODEL_DTYPES:
        allowed = ", ".join(str(allowed).removeprefix("torch.") for allowed in MODEL_DTYPES)
        raise ValueError(
            f"{what} is not a dtype a model can compute in; use one of {allowed} (a torch "
            "dtype or its name, e.g. dtype=torch.bfloat16 or dtype='bfloat16')."
        )
    return dtype


def resolve_dtype(dtype: torch.dtype | str | None, default: torch.dtype) -> torch.dtype:
    """A model dtype (``MODEL_DTYPES``) from a dtype, its name (``"bfloat16"``,
    ``"torch.float16"``) or None (``default``); anything else is a clear error naming it.

    Example:
        >>> resolve_dtype("bfloat16", torch.float32)
        torch.bfloat16
    """
    if dtype is None:
        return default
    if isinstance(dtype, str):
        return check_model_dtype(parse_dtype(dtype), f"dtype={dtype!r}")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype={dtype!r} (of type {type(dtype).__name__}) is not a torch dtype; pass e.g. "
            "dtype=torch.bfloat16 or dtype='bfloat16'."
        )
    return check_model_dtype(dtype, f"dtype={dtype}")


def build_model(
    cfg: HookedTransformerConfig,
    tensors: Iterable[tuple[str, Tensor]],
    tokenizer: Any = None,
    device: torch.device | str | None = None,
    what: str = "The checkpoint",
    fresh: bool = False,
    *,
    model_class: type[nn.Module],
    prepare: Callable[[nn.Module], None] | None = None,
) -> Any:
    """A ``model_class`` (HookedTransformer or a subclass, called as
    ``model_class(cfg, tokenizer=...)``) whose parameters are ``tensors`` (our names), in
    ``cfg.dtype``. ``interp.model`` sits above the loaders, so its constructors pass their
    own class down; the loaders never import it.

    The model is built on the meta device and each tensor is placed on ``device`` in
    ``cfg.dtype`` as it arrives. Tensors are copied unless ``fresh`` says they were read for
    this load alone (then one already in place is kept as it is), so the model never aliases
    a caller's tensors; a source that forgets each tensor once taken (a ``TensorSource``)
    keeps only one copy of the weights alive.

    Args:
        cfg: the model's config.
        tensors: (name, tensor) pairs in our parameter names.
        tokenizer: the model's tokenizer, or None.
        device: where the weights go (default: the CPU).
        what: the checkpoint as error messages name it.
        fresh: whether ``tensors`` were read for this load alone (then not copied).
        prepare: called on the model (still on the meta device) before the tensors are
            placed: a tensor-parallel load swaps in its sharded modules there.

    Example:
        >>> copy = build_model(model.cfg, model.state_dict().items(), model.tokenizer, "cpu",
        ...                    model_class=HookedTransformer)
        >>> ours, theirs = copy.blocks[0].attn.W_Q, model.blocks[0].attn.W_Q
        >>> torch.equal(ours, theirs), ours.data_ptr() != theirs.data_ptr()   # a copy
        (True, True)
    """
    device = check_device(device if device is not None else "cpu")
    # The meta device allocates nothing; seed and device only matter for real tensors.
    seed, cfg.seed, cfg.device, cfg.n_devices = cfg.seed, None, None, 1
    try:
        with torch.device("meta"):
            model = model_class(cfg, tokenizer=tokenizer)
    finally:
        cfg.seed = seed
    if prepare is not None:
        prepare(model)
    # Laid over devices (``placed_by``): each module's device, checked before any tensor
    # is read; else every tensor on ``device``.
    plan = _PLACEMENT.get()
    plan = plan(model) if plan is not None else {}
    # TransformerLens's attention buffers (a model's state_dict() holds them) are checked,
    # not placed: the model computes them.
    buffer_keys, buffers, placed = tl_buffer_keys(model), {}, {}
    for name, tensor in tensors:
        if name in buffer_keys:
            buffers[name] = tensor
        else:
            placed[name] = _placed(tensor, _device_for(name, plan, device), cfg.dtype, fresh)
    try:
        check_model_tl_buffers(model, buffers)
    except ValueError as error:
        raise CheckpointError(f"{what}: {error}") from None
    expected = {name: tuple(t.shape) for name, t in weights_state_dict(model).items()}
    check_names_and_shapes({name: tuple(t.shape) for name, t in placed.items()}, expected, what)
    model.load_state_dict(placed, strict=True, assign=True)
    cfg.device = next(iter(plan.values())) if plan else str(device)
    cfg.n_devices = len(set(plan.values())) if plan else 1
    return model


# The placement ``build_model`` follows: a function from the model (on the meta device) to
# each top-level module's device; set by ``placed_by`` for one load.
_PLACEMENT: ContextVar[Callable[[nn.Module], dict[str, str]] | None] = ContextVar(
    "interp_placement", default=None
)


@contextmanager
def placed_by(plan: Callable[[nn.Module], dict[str, str]]) -> Iterator[None]:
    """Within this block, ``build_model`` places each module's tensors on the device
    ``plan(model)`` gives it (``{"embed": "cuda:0", "blocks.0": "cuda:0", ...}``), computed
    on the model built on the meta device, so a bad plan raises before any tensor is read.
    ``HookedTransformer.from_pretrained(..., n_devices=, device_map=)`` uses it."""
    token = _PLACEMENT.set(plan)
    try:
        yield
    finally:
        _PLACEMENT.reset(token)


def _device_for(name: str, plan: dict[str, str], default: torch.device) -> torch.device | str:
    """The device of the module in ``plan`` that holds tensor ``name`` (else ``default``)."""
    module = name
    while module:
        if module in plan:
            return plan[module]
        module = module.rpartition(".")[0]
    return default


def _placed(tensor: Tensor, device: torch.device, dtype: torch.dtype, fresh: bool) -> Tensor:
    """``tensor`` on ``device`` in ``dtype``, contiguous, owning exactly its own storage (not a
    slice of a fused checkpoint tensor, which would keep the rest alive)."""
    # One conversion straight into a contiguous buffer (a transposed bf16 lm_head becomes a
    # float32 W_U without an intermediate copy).
    if not tensor.is_floating_point():  # MXFP4 blocks and scales stay uint8
        dtype = tensor.dtype
    tensor = (
        tensor.detach()
        .to(device=device, dtype=dtype, copy=not fresh, memory_format=torch.contiguous_format)
        .contiguous()
    )  # (``to`` leaves a tensor that needs no conversion as it is)
    if tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size():
        tensor = tensor.clone()
    return tensor
