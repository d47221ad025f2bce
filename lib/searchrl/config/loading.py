"""Reading parameters: parameter files and ``-p`` values as YAML, and each value checked against its field's type
(exact types, with the few conversions a person means), with the message for an unknown key."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from searchrl.config.errors import ConfigError
from searchrl.config.schema import FIELD_TYPES

__all__ = ["RESERVED_YAML_KEYS", "coerce", "copy_value", "load_params_file", "near_hint", "parse_scalar", "show",
           "type_name", "unknown_key_problem", "yaml_loader"]

# A parameter file may name the notebook it is written for; the runner refuses it for any other notebook.
RESERVED_YAML_KEYS = ("notebook",)


# --------------------------------------------------------------------------------------------------------------
# Type checking: exact types, with the few conversions a person means (int for float, tuple for list).
# --------------------------------------------------------------------------------------------------------------


def coerce(name: str, value: Any) -> tuple[bool, Any]:
    """(True, normalized value) or (False, message) for ``value`` given to field ``name``.

    A string given to a number, bool, list or dict field is read as YAML first: plain papermill passes ``-p rewards
    "[em]"`` as the text "[em]", and PyYAML's default loader reads ``1e-4`` as text.
    """
    ok, out = _coerce_typed(name, value)
    if not ok and isinstance(value, str) and FIELD_TYPES[name] is not str:
        try:
            parsed = parse_scalar(value)
        except ConfigError:
            return ok, out
        if not isinstance(parsed, str):
            ok2, out2 = _coerce_typed(name, parsed)
            if ok2:
                return ok2, out2
    return ok, out


def _coerce_typed(name: str, value: Any) -> tuple[bool, Any]:
    expected = FIELD_TYPES[name]
    if expected is bool:
        return (True, value) if isinstance(value, bool) else (False, _type_msg(name, expected, value))
    if expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return True, value
        if isinstance(value, float) and value.is_integer():
            # 1e3 in YAML is a float; a whole number is clearly meant.
            return True, int(value)
        return False, _type_msg(name, expected, value)
    if expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        return False, _type_msg(name, expected, value)
    if expected is str:
        return (True, value) if isinstance(value, str) else (False, _type_msg(name, expected, value))
    if expected is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            return False, _type_msg(name, expected, value) + "; write a mapping, e.g. {name: {option: value}}"
        return True, {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
    # list[str] / list[float]
    item_type = expected.__args__[0]
    if not isinstance(value, (list, tuple)):
        hint = f"; write a list, e.g. {name}: [{value}]" if isinstance(value, (str, int, float)) else ""
        return False, _type_msg(name, expected, value) + hint
    items = []
    for i, item in enumerate(value):
        if item_type is float and isinstance(item, (int, float)) and not isinstance(item, bool):
            items.append(float(item))
        elif (item_type is int and isinstance(item, int) and not isinstance(item, bool)) or (
                item_type is str and isinstance(item, str)):
            items.append(item)
        else:
            return False, f"parameter {name!r} expects {type_name(expected)}, but item {i} is {show(item)}"
    return True, items


def _type_msg(name: str, expected: Any, value: Any) -> str:
    return f"parameter {name!r} expects {type_name(expected)}, got {show(value)}"


def show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) and not getattr(tp, "__args__", None) else str(tp)


def unknown_key_problem(key: Any, label: str, names: Collection[str] = FIELD_TYPES) -> str | None:
    """The message for a key that is no parameter (None for a parameter), with the nearest of `names` (the
    parameters the notebook at hand takes; default: all)."""
    if key in FIELD_TYPES:
        return None
    if not isinstance(key, str):
        return f"{label}: parameter names must be strings, got {show(key)}"
    return f"{label}: unknown parameter {key!r}{near_hint(key, names)}"


def near_hint(key: str, names: Collection[str]) -> str:
    """' (did you mean ...?)' naming the one of `names` nearest to `key` (same letters in another case, a known
    abbreviation, else the closest spelling), or '' when none is close."""
    lower = {name.lower(): name for name in names}
    if key.lower() in lower:
        near = [lower[key.lower()]]
    elif _ABBREVIATIONS.get(key) in names:
        near = [_ABBREVIATIONS[key]]
    else:
        near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


# Short names people type for a parameter, which string similarity alone does not connect to it.
_ABBREVIATIONS = {"lr": "learning_rate", "steps": "rl_steps", "max_steps": "rl_steps", "k": "top_k",
                  "group_size": "num_generations", "max_completion_length": "max_completion_tokens",
                  "kl_coef": "beta", "epochs": "sft_epochs"}


def copy_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: copy_value(v) for k, v in value.items()}
    return list(value) if isinstance(value, list) else value


# --------------------------------------------------------------------------------------------------------------
# YAML: PyYAML reads 1e-5 as a string (YAML 1.1 wants a dot); this loader reads it as the float everyone means.
# --------------------------------------------------------------------------------------------------------------


class _ParamsLoader(yaml.SafeLoader):
    """SafeLoader that also reads exponent floats without a dot (1e-5, 5E3) as floats."""


_ParamsLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def yaml_loader() -> type[yaml.SafeLoader]:
    """The YAML loader used for parameter files and ``-p`` values."""
    return _ParamsLoader


def parse_scalar(text: str) -> Any:
    """Parse a command-line value as YAML (``3`` -> 3, ``1e-5`` -> 1e-05, ``[em, f1]`` -> list, ``true`` -> True)."""
    try:
        return yaml.load(text, Loader=_ParamsLoader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        raise ConfigError(f"cannot parse value {text!r}: {err}") from None


def load_params_file(path: str | Path) -> tuple[dict[str, Any], str | None]:
    """Read a parameter file: returns (parameters, the notebook it declares or None).

    Raises :class:`ConfigError` naming the file when it is missing, is not valid YAML or is not a mapping. Keys are
    not checked here (that is :meth:`RunConfig.merge`'s job, which names the file too).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"parameter file not found: {path}")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_ParamsLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a parameter file must be a mapping of names to values (name: value per line), "
            f"got {type(data).__name__}"
        )
    notebook = data.pop("notebook", None)
    if notebook is not None and not isinstance(notebook, str):
        raise ConfigError(f"{path}: 'notebook' must be a notebook name such as quickstart, got {show(notebook)}")
    return data, notebook

