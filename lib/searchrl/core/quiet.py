"""Warnings known to be harmless here, silenced where they arise, so that a run's console shows what matters.

Each filter names one message. `silence_known_warnings` drops those from inside TRL 1.16, which still calls
transformers' pre-v6 names for activation checkpointing (`gradient_checkpointing*`, `is_gradient_checkpointing`) on
every step and every trainer; the behaviour is unchanged and nothing a user does can avoid them.
`tied_weights_resume_note` handles the Trainer's "missing keys" warning on resuming a policy whose output layer is
its input embedding matrix (the bundled SmolLM2): the checkpoint stores that matrix once, so the output layer's name
is "missing", yet loading the embedding loads it. The warning would say a resumed run lost weights when it lost none.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import warnings

_HARMLESS = (
    (FutureWarning, r"`(is_)?gradient_checkpointing\w*` is deprecated and will be removed in v6"),
)


def silence_known_warnings() -> None:
    for category, message in _HARMLESS:
        warnings.filterwarnings("ignore", message=message, category=category)


def tied_parameter_names(model) -> set[str]:
    """Names under which `model` holds a parameter it also holds under an earlier name (tied weights)."""
    seen: set[int] = set()
    tied = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            tied.add(name)
        seen.add(id(param))
    return tied


class _TiedKeysFilter(logging.Filter):
    PREFIX = "There were missing keys in the checkpoint model loaded: "

    def __init__(self, tied: set[str]):
        super().__init__()
        self.tied = tied

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(self.PREFIX):
            return True
        try:
            missing = ast.literal_eval(message[len(self.PREFIX):].rstrip("."))
        except (ValueError, SyntaxError):
            return True
        return not (missing and set(missing) <= self.tied)  # any other missing key is a real loss: keep the warning


@contextlib.contextmanager
def tied_weights_resume_note(model):
    """Within the block, drop the Trainer's "missing keys" warning when every key it names is a tied parameter."""
    tied = tied_parameter_names(model)
    logger = logging.getLogger("transformers.trainer")
    note = _TiedKeysFilter(tied)
    logger.addFilter(note)
    try:
        yield
    finally:
        logger.removeFilter(note)


__all__ = ["silence_known_warnings", "tied_parameter_names", "tied_weights_resume_note"]
