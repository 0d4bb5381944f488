"""Every constructor of HookedTransformer builds the class it is called on: the loaders take
the class from ``from_pretrained(cls, ...)`` and the others, so a subclass loads as itself
(with the same weights as HookedTransformer gets), from every kind of checkpoint."""

from __future__ import annotations

import warnings

import pytest
import torch

import interp
from interp import HookedTransformer
from interp.sae import HookedSAETransformer
from tests.conftest import make_hf_gpt2
from tests.loading.test_loading_nanogpt import nanogpt_hf, train_py_checkpoint
from tests.loading.test_loading_toy_models import API, TOY


class MyModel(HookedTransformer):
    """A subclass as a user writes one: a method of its own, nothing else changed."""

    def double_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        return 2 * self(tokens)


def assert_same_weights(ours: torch.nn.Module, reference: torch.nn.Module) -> None:
    assert ours.state_dict().keys() == reference.state_dict().keys()
    for name, tensor in reference.state_dict().items():
        assert torch.equal(ours.state_dict()[name], tensor), name


def hf_folder(tmp_path):
    make_hf_gpt2(n_layer=1).save_pretrained(tmp_path / "hf")
    return tmp_path / "hf"


@pytest.mark.parametrize("constructor", ["from_pretrained", "from_pretrained_no_processing"])
def test_a_subclass_loads_a_hugging_face_folder_as_itself(tmp_path, constructor):
    folder = hf_folder(tmp_path)
    model = getattr(MyModel, constructor)(folder)
    assert type(model) is MyModel
    assert_same_weights(model, getattr(HookedTransformer, constructor)(folder))
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(model.double_logits(tokens), 2 * model(tokens), rtol=0, atol=0)


def test_a_subclass_loads_an_in_memory_hugging_face_model_as_itself():
    hf_model = make_hf_gpt2(n_layer=1)
    model = MyModel.from_pretrained_no_processing("gpt2", hf_model=hf_model)
    assert type(model) is MyModel
    reference = HookedTransformer.from_pretrained_no_processing("gpt2", hf_model=hf_model)
    assert_same_weights(model, reference)


def test_a_subclass_loads_interps_own_folder_as_itself(tmp_path):
    saved = interp.load_model("attn-only-2l").save(tmp_path / "native")
    model = MyModel.from_pretrained_no_processing(saved)
    assert type(model) is MyModel
    assert_same_weights(model, interp.load_model("attn-only-2l"))


def test_a_subclass_loads_a_transformer_lens_folder_as_itself(tmp_path):
    name = sorted(TOY)[0]
    folder = tmp_path / "toy"
    folder.mkdir()
    for file in ("config.json", "model_final.pth"):
        (folder / file).write_bytes((API / "toy" / name / file).read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no cached tokenizer: said elsewhere
        model = MyModel.from_pretrained_no_processing(folder)
        reference = HookedTransformer.from_pretrained_no_processing(folder)
    assert type(model) is MyModel
    assert_same_weights(model, reference)


def test_a_subclass_loads_a_nanogpt_checkpoint_as_itself():
    checkpoint = train_py_checkpoint(nanogpt_hf())
    model = MyModel.from_nanogpt(checkpoint)
    assert type(model) is MyModel
    assert_same_weights(model, HookedTransformer.from_nanogpt(checkpoint))


def test_the_other_entry_points_still_build_their_own_class(tmp_path):
    assert type(interp.load_model("attn-only-2l")) is HookedTransformer
    folder = hf_folder(tmp_path)
    assert type(HookedTransformer.from_pretrained(folder)) is HookedTransformer
    assert type(HookedSAETransformer.from_pretrained(folder)) is HookedSAETransformer
    assert type(HookedSAETransformer.from_pretrained_no_processing(folder)) is HookedSAETransformer
