"""The resume warning about a tied output layer is dropped only when the named keys are tied and so were loaded."""

from __future__ import annotations

import logging

import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

from searchrl.core.quiet import tied_parameter_names, tied_weights_resume_note

MESSAGE = "There were missing keys in the checkpoint model loaded: {}."  # transformers.Trainer's wording


def llama(tied: bool, seed: int = 0):
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied))


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def warnings_logged(model, keys):
    logger = logging.getLogger("transformers.trainer")
    collect = Collect()
    logger.addHandler(collect)
    try:
        with tied_weights_resume_note(model):
            logger.warning(MESSAGE.format(keys))
        logger.warning(MESSAGE.format(keys))  # outside the block: nothing is filtered
    finally:
        logger.removeHandler(collect)
    return collect.messages


def test_tied_names_are_the_later_names_of_a_shared_parameter():
    assert tied_parameter_names(llama(tied=True)) == {"lm_head.weight"}
    assert tied_parameter_names(llama(tied=False)) == set()


def test_a_checkpoint_without_the_tied_output_layer_loads_it_and_the_warning_is_dropped(tmp_path):
    trained = llama(tied=True, seed=1)
    trained.save_pretrained(tmp_path)  # as a trainer checkpoint: the shared matrix once, under the embedding's name
    resumed = llama(tied=True, seed=2)
    result = resumed.load_state_dict(load_file(str(tmp_path / "model.safetensors")), strict=False)
    assert result.missing_keys == ["lm_head.weight"]
    assert torch.equal(resumed.lm_head.weight, trained.lm_head.weight)  # the "missing" key was loaded after all
    assert warnings_logged(resumed, result.missing_keys) == [MESSAGE.format(["lm_head.weight"])]  # only the outer one


def test_a_missing_key_that_is_not_tied_still_warns():
    for model, keys in ((llama(tied=True), ["lm_head.weight", "model.norm.weight"]),
                        (llama(tied=False), ["lm_head.weight"])):
        assert warnings_logged(model, keys) == [MESSAGE.format(keys)] * 2
