"""Models beyond one process: tensor parallel over ``torch.distributed``.

``HookedTransformer.from_pretrained(name_or_folder, tp_size=N)``, called on every rank of
``torchrun --nproc_per_node N``, gives each rank its share of every block's heads and
neurons (read alone from the checkpoint's files); a forward runs one all-reduce after each
attention and each MLP, and every hook sees, edits and differentiates the whole activation,
as in one process.

- ``process_group``: the process group (from torchrun's environment), errors raised on
  every rank together;
- ``plan``: valid sizes, each rank's share, each hook's and checkpoint tensor's split;
- ``collectives``: the differentiable all-reduce and gather/scatter steps;
- ``sharded_loading``: reading a rank's slices of a checkpoint;
- ``layers``: the sharded attention, MLP and mixture of experts;
- ``hooks``: gathered and replicated hook points;
- ``sharded_hooks``: the opt-in mode where hooks see each rank's own part;
- ``data_parallel``: copies of the model on a 2-D mesh, sharing out work and gathering it;
- ``inputs``: the check that every rank runs the same input;
- ``processing``: TransformerLens's weight processing on shards;
- ``pretrained``: ``from_pretrained(..., tp_size=N)``.
"""

from interp.distributed.data_parallel import data_parallel_share, gather_data_parallel
from interp.distributed.plan import ShardPlan, check_tp_size, valid_sizes
from interp.distributed.pretrained import load_pretrained_tp
from interp.distributed.process_group import TensorParallelError, TPGroup, tensor_parallel_group
from interp.distributed.sharded_hooks import sharded_hooks

__all__ = [
    "ShardPlan",
    "TPGroup",
    "TensorParallelError",
    "check_tp_size",
    "data_parallel_share",
    "gather_data_parallel",
    "load_pretrained_tp",
    "sharded_hooks",
    "tensor_parallel_group",
    "valid_sizes",
]
