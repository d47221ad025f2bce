"""`nano`: a model of about a million weights that reads and writes the synthetic world, for RL that shows in minutes.

SmolLM2-135M trains a few hundred rollouts an hour on two CPU cores; a model this size, with a vocabulary fitted to
the world's templated language, does hundreds a minute. The recipe:

1. **Tokenizer.** A byte-level BPE of `VOCAB_SIZE` pieces fitted to the text of worlds of other seeds
   (`PRETRAIN_SEEDS`: passages, questions, the search_r1 prompt and written trajectories), with every protocol's
   tags as whole tokens. Names are invented from syllables, so a world the tokenizer never saw still tokenizes into
   the same syllable pieces; byte-level pieces decode back to the exact text. No chat template: profiles set
   `chat_prompt: false` (a plain prompt is what `build_prompt` writes without one anyway).
2. **Architecture.** A Llama of `LAYERS` blocks, `HIDDEN` wide, tied embeddings (`nano_config`).
3. **Pre-training.** `PRETRAIN_STEPS` steps of next-token loss on the same worlds: their passages (the language,
   and how facts are stated) and written search_r1 trajectories of single-hop questions, one search each, with the
   retrieved documents masked out of the loss (so the model learns to copy a name from a document into its answer,
   not to memorise documents). It never sees the evaluation world: its facts are reachable only by search.

`searchrl.models.policy_path("nano")` builds it on first use and caches it under a folder named with
`RECIPE_VERSION`; `build_nano` is the recipe. A run's own cold start and RL then train it on its world.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time

import torch

logger = logging.getLogger(__name__)

RECIPE_VERSION = 5  # part of the cache folder's name: a changed recipe must not load a model built by the old one
PROTOCOL = "search_r1_compact"  # Search-R1's tags under a short instruction: a third of the prompt's tokens
# Worlds of their own: the notebooks use world_seed 0 (and tiny-searcher seed 1), so none of these facts is asked.
# Many worlds, so that no name recurs often enough to be memorised: trained on four (1,130 trajectories, each seen
# about ten times) the model learnt those worlds' names and copied none of an unseen world's.
PRETRAIN_SEEDS = tuple(range(101, 141))
TOKENIZER_WORLDS = 4  # the BPE is fitted on the first few: its syllable pieces are the same in every world
WORLD = {"n_entities": 200, "words_per_passage": 40}  # the nano profile's world size, so passages read alike
TOP_K = 2  # documents per search in the written trajectories (the nano profile's top_k)
VOCAB_SIZE = 2048  # at 4096 the leftover merges spell whole names of these worlds, which no other world has
HIDDEN, LAYERS, HEADS = 128, 4, 4
MAX_POSITIONS = 1024
PRETRAIN_STEPS = 400
BATCH_SIZE = 16
LEARNING_RATE = 3e-3
WARMUP_STEPS = 50
PASSAGE_SHARE = 0.25  # share of each batch that is plain passages; the rest are trajectories
# Phases on copying: after the first, the model writes the format but garbles the names it copies from the question.
# Part of each batch is then the trajectories' first turns (question -> thought and query naming the entity; a fifth
# of a trajectory's tokens), the rest whole trajectories, at a lower rate.
# A third phase, weighted to whole trajectories: after the second the queries named the question's entity (the
# right passage retrieved for 46% of unseen single-hop questions) but answers were still garbled copies.
COPY_PHASES = ((500, 0.5), (400, 0.25))  # (steps, share of first turns in a batch)
COPY_LEARNING_RATE = 1e-3
# Fresh worlds (`build_nano(fresh_every=...)`): a new world of its own seed every few batches, from FRESH_SEED up,
# so that no name or fact recurs and an answer's loss can fall only by copying it out of the documents in context.
# Not the default: every 4 batches, the same 1,300 steps, greedy F1 on unseen single-hop questions was 0.0375 (the
# right passage for 0.19) against the forty fixed worlds' 0.069 (0.63); its loss was still 1.1 and falling.
FRESH_EVERY = None  # batches per world; None: the fixed worlds of PRETRAIN_SEEDS
FRESH_SEED = 1000  # first seed of the fresh worlds (clear of 0, 1, 7 and PRETRAIN_SEEDS)
# Reading phases after the copying phases (`build_nano(read_phases=...)`): batches of mostly the trajectories' last
# turns (the answer written after the documents; everything before the last `</information>` masked) drawn from a
# fresh world every READ_EVERY batches, so the answer's loss can fall only by reading it out of the documents in
# context; the rest of each batch whole trajectories of the same world, so the format is kept.
# Steps of each reading phase (each its own warm-up and cosine, and worlds of its own, READ_SEED + 1000 * phase up).
# Greedy F1 on unseen single-hop questions: 0.069 without, 0.231 after one phase of 1,200, 0.556 after two
# (docs/lab/LOG.md, 2026-12-02, round 3).
READ_PHASES: tuple[int, ...] = (1200, 1200)
READ_EVERY = 16  # batches per fresh world in the reading phase (a world has about 280 single-hop trajectories)
READ_SHARE = 0.75  # share of each reading batch that is last turns
READ_LEARNING_RATE = 1e-3
READ_SEED = 5000  # first seed of the reading phase's worlds (clear of FRESH_SEED's)
EOS, PAD = "<|endoftext|>", "<|pad|>"


def protocol_tags() -> list[str]:
    """Every registered protocol's tags (query, observation, answer, reasoning and internal-answer spans)."""
    from searchrl.protocols import PROTOCOLS, get_protocol

    tags: dict[str, None] = {}
    for name in PROTOCOLS.names():
        protocol = get_protocol(name)
        for attr in dir(protocol):
            if attr.endswith(("_open", "_close")):
                value = getattr(protocol, attr)
                if isinstance(value, str) and value.strip().startswith("<") and len(value.strip()) > 2:
                    tags[value.strip()] = None
    return list(tags)


def pretrain_worlds(seeds=PRETRAIN_SEEDS):
    from searchrl.data.synthetic import make_world

    return [make_world(seed=s, progress=False, **WORLD) for s in seeds]


def world_texts(world, protocol) -> list[str]:
    """The text a world is written in, as a model meets it: passages as the protocol shows them, and questions."""
    docs = [protocol.format_doc(1, d) for d in world.corpus]
    questions = [protocol.build_prompt(r["question"], None, chat=False) for rows in world.splits.values()
                 for r in rows]
    return docs + questions


def invented_name_words(world) -> set[str]:
    """The words of the world's entity names that its templates never use: the invented, seed-specific ones."""
    from searchrl.data.synthetic.passages import template_vocabulary

    known = {w.lower() for w in template_vocabulary()}
    return {w for e in world.entities for w in re.findall(r"[A-Za-z]+", e.name) if w.lower() not in known}


def tokenizer_corpus(worlds, protocol, trajectories: list[dict]) -> list[str]:
    """What the BPE is fitted on: the worlds' text with the invented names taken out, then each invented word once.

    A name occurs in dozens of a world's passages, so fitted on the plain text the BPE would spend its merges on
    whole names of these worlds, which no other world has. Seen once each, names only teach it their syllables,
    which every world shares; the template words, seen thousands of times, become whole tokens.
    """
    names = set().union(*(invented_name_words(w) for w in worlds))
    pattern = re.compile(r"\b(?:" + "|".join(sorted(names, key=len, reverse=True)) + r")\b")
    texts = [t for w in worlds for t in world_texts(w, protocol)]
    texts += [segment for item in trajectories for segment, _ in item["segments"]]
    return [pattern.sub("", t) for t in texts] + [" " + n for n in sorted(names)]


def trajectory_items(world, protocol, types=("single_hop",), limit: int | None = None) -> list[dict]:
    """Written one-search trajectories (prompt + segments) of the world's training questions of `types` (the first
    `limit` of them with a limit)."""
    from searchrl.config.rollout import RolloutConfig
    from searchrl.data.synthetic.trajectories import templated_trajectories
    from searchrl.retrieval import BM25Retriever

    retriever = BM25Retriever(world.corpus, show_progress=False)
    rows = [r for r in world.splits["train"] if r["metadata"]["type"] in types][:limit]
    return templated_trajectories(rows, protocol, retriever, rollout=RolloutConfig(top_k=TOP_K, max_searches=1),
                                  chat=False)


def build_nano_tokenizer(texts: list[str], vocab_size: int = VOCAB_SIZE, tags: list[str] | None = None):
    """A byte-level BPE `PreTrainedTokenizerFast` fitted to `texts`, with `tags` as whole (non-special) tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, pad_token=PAD,
                                        clean_up_tokenization_spaces=False)
    tokenizer.add_tokens(list(tags if tags is not None else protocol_tags()))
    tokenizer.padding_side = "left"
    tokenizer.model_max_length = MAX_POSITIONS
    return tokenizer


def nano_config(tokenizer, *, hidden: int = HIDDEN, layers: int = LAYERS, heads: int = HEADS):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 4,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                       max_position_embeddings=MAX_POSITIONS, tie_word_embeddings=True, rope_theta=10000.0,
                       bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)


def pretraining_examples(worlds, protocol, tokenizer, limit: int | None = None) -> tuple[list, list]:
    """(trajectory examples, passage examples), each (input_ids, labels): the trajectories' prompts and retrieved
    documents masked, the passages trained whole; with `limit`, at most that many of each per world."""
    from searchrl.data.tokenize import tokenize_sft

    items = [item for world in worlds for item in trajectory_items(world, protocol, limit=limit)]
    tokenized = tokenize_sft(items, tokenizer, MAX_POSITIONS)
    trajectories = list(zip(tokenized["input_ids"], tokenized["labels"]))
    passages = []
    for world in worlds:
        for doc in world.corpus[:limit]:
            ids = tokenizer(protocol.format_doc(1, doc), add_special_tokens=False)["input_ids"]
            passages.append((ids, list(ids)))
    return trajectories, passages


def first_turn_examples(trajectories: list, tokenizer) -> list:
    """Each (input_ids, labels) trajectory cut after its first search call (the first `</search>`)."""
    close = tokenizer.convert_tokens_to_ids("</search>")
    return [(ids[: ids.index(close) + 1], labels[: ids.index(close) + 1]) for ids, labels in trajectories
            if close in ids]


def final_turn_examples(trajectories: list, tokenizer) -> list:
    """Each (input_ids, labels) trajectory with its labels kept only after its last `</information>`: the turn that
    reads the answer out of the documents."""
    from searchrl.data.tokenize import IGNORE_INDEX

    close = tokenizer.convert_tokens_to_ids("</information>")
    out = []
    for ids, labels in trajectories:
        if close not in ids:
            continue
        cut = len(ids) - ids[::-1].index(close)
        out.append((ids, [IGNORE_INDEX] * cut + list(labels[cut:])))
    return out


def pretrain(model, tokenizer, trajectories, passages, *, steps: int = PRETRAIN_STEPS, seed: int = 0,
             progress: bool = True, learning_rate: float = LEARNING_RATE, share: float = PASSAGE_SHARE,
             desc: str = "nano pre-training", source=None, every: int = 1) -> dict:
    """Train `model` in place for `steps` steps of batches mixing `trajectories` and, a `share` of each batch,
    `passages` (any second list of examples); returns {"steps", "losses", "seconds"}. With `source` (a callable
    returning a new (trajectories, passages) pair), the two lists are replaced by its next pair every `every` steps."""
    from searchrl.core.progress import progress_bar
    from searchrl.models.tiny_searcher import _batch, trained_token_loss

    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0, betas=(0.9, 0.98))

    def rate(step: int) -> float:  # warm up, then cosine down to a tenth
        if step < WARMUP_STEPS:
            return (step + 1) / WARMUP_STEPS
        done = (step - WARMUP_STEPS) / max(1, steps - WARMUP_STEPS)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    losses: list[float] = []
    start = time.perf_counter()
    model.train()
    bar = progress_bar(total=steps, desc=desc, disable=not progress)
    for step in range(steps):
        if source is not None and step % every == 0:
            trajectories, passages = source()
        n_passages = round(BATCH_SIZE * share) if passages else 0  # after the source: its lists start empty
        picked = rng.sample(trajectories, BATCH_SIZE - n_passages) + rng.sample(passages, n_passages)
        loss = trained_token_loss(model, _batch(picked, tokenizer.pad_token_id))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")
    bar.close()
    model.eval()
    return {"steps": steps, "losses": losses, "seconds": time.perf_counter() - start}


def fresh_worlds(protocol, tokenizer, every: int, first_seed: int = FRESH_SEED):
    """A callable returning (trajectories, passages, first turns) of a new world at each call, seeds from
    `first_seed` up, each list cut to what `every` batches draw from it."""
    from searchrl.data.synthetic import make_world

    seeds = iter(range(first_seed, first_seed + 10**6))
    limit = every * BATCH_SIZE

    def next_world():
        world = make_world(seed=next(seeds), progress=False, **WORLD)
        trajectories, passages = pretraining_examples([world], protocol, tokenizer, limit=limit)
        return trajectories, passages, first_turn_examples(trajectories, tokenizer)

    return next_world


def reading_worlds(protocol, tokenizer, every: int = READ_EVERY, first_seed: int = READ_SEED):
    """A callable returning (whole trajectories, last turns) of a new world at each call, seeds from `first_seed` up."""
    draw = fresh_worlds(protocol, tokenizer, every, first_seed=first_seed)

    def next_world():
        trajectories, _, _ = draw()
        return trajectories, final_turn_examples(trajectories, tokenizer)

    return next_world


def read(model, tokenizer, phases=READ_PHASES, *, seed: int = 0, first: int = 0, progress: bool = True) -> list:
    """Train `model` in place through the reading phases `phases[first:]` (steps each) as `build_nano` does after
    its copying phases; a saved build that stopped after reading phase number `first` (0: after the copying
    phases) continues exactly where the recipe would.
    Returns each phase's log."""
    from searchrl.protocols import get_protocol

    protocol, logs = get_protocol(PROTOCOL), []
    for phase in range(first, len(phases)):
        log = pretrain(model, tokenizer, [], [], steps=phases[phase], seed=seed + len(COPY_PHASES) + 1 + phase,
                       progress=progress, learning_rate=READ_LEARNING_RATE, share=READ_SHARE,
                       desc=f"nano reading {phase + 1}", every=READ_EVERY,
                       source=reading_worlds(protocol, tokenizer, first_seed=READ_SEED + 1000 * phase))
        logger.info("nano: %d reading steps in %.0f s, final loss %.3f", log["steps"], log["seconds"],
                    log["losses"][-1])
        logs.append(log)
    return logs


def build_nano(seed: int = 0, *, steps: int | None = None, copy_steps: int | None = None, seeds=PRETRAIN_SEEDS,
               progress: bool = True, fresh_every: int | None = FRESH_EVERY, read_phases=READ_PHASES):
    """(model, tokenizer): the nano tokenizer and model, pre-trained for `steps` steps (default `PRETRAIN_STEPS`),
    then each copying phase (`COPY_PHASES`; `copy_steps` replaces each one's steps), on the worlds of `seeds`; with
    `fresh_every`, on a new world every `fresh_every` batches instead (the tokenizer still fitted on `seeds`); then,
    then the reading phases `read_phases` (steps each) on fresh worlds (`read`)."""
    steps = PRETRAIN_STEPS if steps is None else steps
    from transformers import LlamaForCausalLM

    from searchrl.protocols import get_protocol

    protocol = get_protocol(PROTOCOL)
    worlds = pretrain_worlds(seeds[:TOKENIZER_WORLDS] if fresh_every else seeds)
    fitted = worlds[:TOKENIZER_WORLDS]
    tokenizer = build_nano_tokenizer(tokenizer_corpus(fitted, protocol, trajectory_items(fitted[0], protocol)))
    torch.manual_seed(seed)
    model = LlamaForCausalLM(nano_config(tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    if fresh_every:
        draw = fresh_worlds(protocol, tokenizer, fresh_every)
        trajectories = passages = turns = []
        sources = (lambda: draw()[:2], lambda: draw()[::2])  # (trajectories, passages), (trajectories, turns)
    else:
        trajectories, passages = pretraining_examples(worlds, protocol, tokenizer)
        turns = first_turn_examples(trajectories, tokenizer)
        sources = (None, None)
    log = pretrain(model, tokenizer, trajectories, passages, steps=steps, seed=seed, progress=progress,
                   source=sources[0], every=fresh_every or 1)
    logger.info("nano: %d steps in %.0f s, final loss %.3f", steps, log["seconds"], log["losses"][-1])
    for phase, (copy, share) in enumerate(COPY_PHASES, 1):
        copy = copy if copy_steps is None else copy_steps
        log = pretrain(model, tokenizer, trajectories, turns, steps=copy, seed=seed + phase, progress=progress,
                       learning_rate=COPY_LEARNING_RATE, share=share, desc=f"nano copying {phase}",
                       source=sources[1], every=fresh_every or 1)
        logger.info("nano: %d copying steps in %.0f s, final loss %.3f", copy, log["seconds"], log["losses"][-1])
    read(model, tokenizer, read_phases, seed=seed, progress=progress)
    return model, tokenizer


def parameter_count(model) -> int:
    """Distinct weights (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


__all__ = [
    "PRETRAIN_SEEDS",
    "PROTOCOL",
    "RECIPE_VERSION",
    "build_nano",
    "build_nano_tokenizer",
    "final_turn_examples",
    "first_turn_examples",
    "fresh_worlds",
    "nano_config",
    "parameter_count",
    "pretrain",
    "pretraining_examples",
    "protocol_tags",
    "read",
    "reading_worlds",
    "trajectory_items",
    "world_texts",
]
