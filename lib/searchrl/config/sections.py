"""The run's own settings, by section: where a run is recorded and runs, the policy model, the questions, the
retriever, the search protocol and the supervised cold start. `RunConfig` inherits each class (as it inherits each
mechanism's settings), so params files set them flat; each field's documentation is the string under it."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ColdStartSettings", "DataSettings", "GeneralSettings", "ModelSettings", "ProtocolSettings",
           "RetrievalSettings"]


@dataclass(frozen=True)
class GeneralSettings:
    """The run's label, seed and folders, its experiment tracker, device and CPU threads."""

    # == general ==
    run_name: str = ""
    """Label appended to the run folder's id (outputs/<notebook>/<timestamp>-<suffix>-<run_name>); empty: id only."""
    seed: int = 0
    """Random seed for sampling, initialisation and data order."""
    output_root: str = "outputs"
    """Folder that holds run folders; a relative path is taken from the project root."""
    evidence_copy_dir: str = ""
    """Folder that receives a slim copy of the run folder (`python -m searchrl.slim`: no weights), as
    <folder>/<notebook>/<run>, each time an ablation arm finishes and when the run ends, replacing the previous copy;
    for a machine that may be lost, point it at a folder that outlives it (synced, mounted, or in git). A relative
    path is taken from the project root. Empty: no copy."""
    resume: bool = False
    """Continue the run in the current run folder from its last checkpoint (set by `searchrl.runner --resume`)."""
    report_to: str = "none"
    """Experiment tracker handed to TRL: none, tensorboard, trackio, wandb (or another transformers integration)."""
    device: str = "auto"
    """Where to run: auto (GPU when present), cpu, cuda, cuda:N or mps."""
    torch_threads: int = 0
    """CPU threads for torch (0 keeps torch's default, one a core, and warns when other processes already use the
    cores). On a busy shared CPU, 1 can be several times faster (searchrl.core.threads)."""


@dataclass(frozen=True)
class ModelSettings:
    """The policy model, LoRA, precision and the vLLM engine."""

    # == model ==
    model: str = "smollm2-135m-instruct"
    """Policy model: a name from the model registry or a local path / hub id."""
    use_peft: bool = False
    """Train LoRA adapters instead of all weights."""
    lora_r: int = 16
    """LoRA rank (only with use_peft)."""
    lora_alpha: int = 32
    """LoRA scaling numerator (only with use_peft)."""
    bf16: bool = False
    """Train in bfloat16 mixed precision: the forward and backward passes autocast to bfloat16, the policy's weights
    and optimizer state stay float32 (stored in bfloat16, small updates round away); rollouts are generated in
    float32 (on this CPU, bfloat16 decoding ran 0.7-0.8x float32's speed: benchmarks/bf16_decode.py). Fast on GPUs,
    and on CPUs with native bf16 instructions: on this project's 2-core AVX512-BF16 machine (torch 2.13) RL's
    forward and backward pass ran 1.4-1.6x faster than float32, its gradient at cosine 0.995 to float32's, where two
    micro-batches' float32 gradients are at 0.03 (benchmarks/bf16_pass.py). Whether RL learns as well in bfloat16 on
    a CPU is not measured yet."""
    use_vllm: bool = False
    """Generate rollouts with vLLM (GPU only)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Fraction of GPU memory vLLM may reserve, in (0, 1] (colocate mode; a server takes its own flag)."""
    vllm_mode: str = "colocate"
    """colocate (vLLM inside each training process, sharing its GPU) or server (a separate `trl vllm-serve` on
    other GPUs, whose weights TRL updates after every step; start it before training)."""
    vllm_server_url: str = ""
    """Base URL of the vLLM server in server mode, e.g. http://10.0.0.2:8000; empty: TRL's default (port 8000 on
    this host)."""


@dataclass(frozen=True)
class DataSettings:
    """Where the questions come from (the synthetic world or a QA file), how many, which types."""

    # == data ==
    dataset: str = "synthetic"
    """Question source: 'synthetic' (the generated world), a path to a QA file, or a data catalogue name
    (`searchrl data list`, e.g. r1searcher-stage2) resolved in $SEARCHRL_DATA (default ~/.cache/searchrl/data) or
    ../shared/data; a named entry that is absent stops the run before any model loads, naming the
    `searchrl data fetch` command. A named dataset trains on its train split and evaluates on `eval_split` when it
    has one; a file (or a name without that split) holds its evaluation questions out of the same file."""
    corpus: str = ""
    """The passages the retriever searches: a path (jsonl or tsv) or a corpus name from the data catalogue (e.g.
    wiki-18, kilt-2019); empty with a named dataset: that entry's default corpus. Ignored for the synthetic
    dataset."""
    world_seed: int = 0
    """Seed of the synthetic world (entities, facts and their documents)."""
    world_entities: int = 200
    """Number of entities in the synthetic world (at least 30)."""
    world_passage_words: int = 100
    """Approximate words per synthetic passage; shorter passages make CPU rollouts cheaper."""
    train_question_types: list[str] = field(default_factory=list)
    """Question types used for training (e.g. single_hop, inference); empty: all types."""
    train_max_hops: int = 0
    """Keep only training questions of at most this many hops; 0: no limit. Equal to max_searches, every training
    question can be answered within the search budget, so a correct answer is reachable by sampling."""
    n_train: int = 256
    """Number of training questions."""
    n_eval: int = 100
    """Number of evaluation questions."""
    n_eval_untrained: int = 0
    """Evaluation questions for the "untrained" stage (a subset of the n_eval); 0: all n_eval. An untrained model
    rarely closes its answer, so each of its rollouts runs to the token budget: a subset shows the same zero for
    less time."""
    eval_split: str = "test"
    """Split of the dataset used for evaluation."""
    eval_question_types: list[str] = field(default_factory=list)
    """Question types of the held-out questions (e.g. single_hop, bridge); empty: all types. Leaving out the types
    whose answer is one of two names in the question (comparison, bridge_comparison) keeps guessing near zero F1."""
    eval_max_hops: int = 0
    """Keep only held-out questions of at most this many hops; 0: no limit."""
    train_world_seed: int = -1
    """Synthetic dataset: the seed of a second world that the cold start and RL train on, apart from the evaluation
    world (world_seed). Its passages join the retriever's corpus, so the held-out questions are about entities the
    model never trained on, whose passages only a search finds; any split of the evaluation world (eval_split, even
    train) is then held out. -1: train on world_seed's own train split."""
    train_worlds: int = 1
    """Synthetic dataset with train_world_seed >= 0: how many training worlds, of seeds train_world_seed,
    train_world_seed + 1, ...; all their passages join the corpus and the training questions are drawn from all of
    them. With many, an invented name or fact rarely recurs across the training questions, so the reward can be
    earned only by reading the retrieved documents, not by remembering the training world."""


@dataclass(frozen=True)
class RetrievalSettings:
    """Which retriever answers the searches."""

    # == retrieval ==
    retriever: str = "bm25"
    """Retriever name from the retrieval registry: bm25 or dense, a retrieval service http://HOST:PORT, a server of
    Search-R1's retriever API search_r1+http://HOST:PORT/retrieve, a web search API web+https://HOST/PATH (web_*
    settings), or replay:<run folder>, which answers each search as that run's record of its searches does, with
    neither index nor API (docs/replay.md) (documents per search: top_k). Every run records its searches in
    retrieval/ of its folder."""
    replay_fallback: str = ""
    """With retriever: replay:<run folder>, the live retriever (any retriever name but a replay, e.g. bm25) that
    answers a search the record lacks; built at the first such search, and its answers are recorded in this run's
    folder like any other. Empty: a search the record lacks stops the run with an error naming the query."""


@dataclass(frozen=True)
class ProtocolSettings:
    """The search protocol and its prompt."""

    # == protocol ==
    protocol: str = "search_r1"
    """Search protocol (tag format and prompt) from the protocol registry."""
    chat_prompt: bool = True
    """Wrap the prompt in the tokenizer's chat template."""


@dataclass(frozen=True)
class ColdStartSettings:
    """Supervised cold-start training before RL."""

    # == cold start ==
    sft_examples: int = 0
    """Supervised cold-start examples before RL; 0: no cold start."""
    sft_question_types: list[str] = field(default_factory=lambda: ["single_hop"])
    """Question types used for the cold-start examples."""
    sft_type_weights: dict = field(default_factory=dict)
    """Demonstrations of each question type per round of the cold start's round robin over
    `sft_question_types` (a type not named: 1), e.g. {single_hop: 3} makes half of four types' demonstrations
    single-hop. Too few of a type, and the cold start plans the other types' way on it too (measured:
    docs/levers.md)."""
    sft_source: str = "templated"
    """Where the cold start's sft_examples demonstrations come from (`searchrl.sft.sources`): templated
    (trajectories written from the data's supporting facts: the synthetic world, or rows whose metadata give their
    hops), answer_only (the question, then the answer in the protocol's tags, no search: Search-R1's SFT baseline),
    rejection:<model> (correct, well-formed search rollouts sampled from a teacher: a model name, hub id or folder;
    R1-Searcher's SFT data are Qwen-2.5-7B-Instruct trajectories; rejection:policy samples the run's own model, as
    R1-Searcher++ does), or a JSON-lines trajectory file (items with segments and a prompt or question, or
    completion_ids and env_mask in the policy's tokens)."""
    sft_batch_size: int = 8
    """Cold-start examples per optimizer step, however many processes share them (R1-Searcher++: 64)."""
    sft_epochs: float = 1.0
    """Epochs of cold-start training."""
    sft_plan_thought: bool = False
    """Demonstrations open with a plan that counts the question's facts ("This needs two facts: the mother of X,
    then the father of that mother.") instead of naming only the first, so the choice of how many searches is made
    right after the question (data/synthetic/trajectories.py `plan_sentence`). Synthetic world only."""
    sft_learning_rate: float = 5e-5
    """Learning rate of cold-start training."""
    sft_group_by_length: bool = False
    """Batch cold-start examples of similar length together (transformers' length-grouped sampler) instead of in
    random order, so that short items are not padded to a long one. Pays when lengths differ widely: R1-Searcher++'s
    knowledge cold start mixes 48 trajectories of up to 900 tokens with ~900 fact statements of ~30, and grouping
    cuts its padded tokens per epoch from ~250k to ~83k in batches of 8, and from ~95k to ~64k in micro-batches of 2
    (benchmarks/sft_padding.py)."""
