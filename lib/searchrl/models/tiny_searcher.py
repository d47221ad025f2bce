"""`tiny-searcher`: the tiny random test model, taught by a short supervised run to open with a search call.

The tiny random model never writes a search call, so a smoke run of a notebook would show no retrieved span. This
one is the same tiny Llama trained, for well under a minute of one CPU core, on the first turns (thought, then
query) of written Search-R1 trajectories about a synthetic world other than the notebooks'. Under greedy decoding
it then opens with `<think> ... </think>` and a `<search>` query of its own, the search engine answers, and the
trajectory viewer has a retrieved span to mark. Its queries are poor (it copies entity names badly); that is all a
smoke run needs. It knows only the search_r1 tags.

`searchrl.models.policy_path("tiny-searcher")` builds it on first use and caches it; `build_tiny_searcher` is the
recipe.
"""

from __future__ import annotations

import logging

import torch

from searchrl.data.tokenize import IGNORE_INDEX

logger = logging.getLogger(__name__)

RECIPE_VERSION = 1  # part of the cache folder's name: a changed recipe must not load a model built by the old one
PROTOCOL = "search_r1"
# A world of its own (not the notebooks' seed 0), with short passages: only the first turn is trained and the
# documents are never read, so their length would only cost retrieval time.
WORLD = {"seed": 1, "n_entities": 100, "words_per_passage": 20}
BATCH_SIZE = 8
LEARNING_RATE = 1e-2  # high: three million random weights have far to go in a few dozen steps
WARMUP_STEPS = 10
# From a random start, how many steps it takes to search reliably varies with the seed and with the CPU's rounding
# (60 to 120 in trials of four seeds): a fixed count would be wasteful or, somewhere, not enough. So the training
# checks greedy openings on held-out questions as it goes and stops once most of them search.
FIRST_CHECK, CHECK_EVERY, MAX_STEPS = 60, 10, 300
CHECK_QUESTIONS, ENOUGH_SEARCHING = 8, 6
# Output rows per slice of the loss: 128 x 49k logits is 25 MB. glibc's malloc maps each larger block fresh from the
# kernel and unmaps it on free, so unsliced logits spent as much time in page faults as in arithmetic.
LOGIT_ROWS = 128
OPENING_TOKENS = 64  # a check's turn length; the tiny profiles give a rollout more than this


def first_turns(items: list[dict]) -> list[dict]:
    """Each written trajectory cut after its first search call: the segments before the first observation.

    Only the opening is trained: it is what makes the model search, and the cut keeps the build cheap.
    """
    cut = []
    for item in items:
        segments = item["segments"]
        first_observation = next(i for i, (_, trainable) in enumerate(segments) if not trainable)
        cut.append({**item, "segments": segments[:first_observation]})
    return cut


def search_openings(world, tokenizer) -> list[tuple[list[int], list[int]]]:
    """(input_ids, labels) of the first turn of the training questions of `world`, the prompt masked out.

    Only the turns whose query leads with the entity's name and ends with the relation's words ("X birth year
    born", not "when was X born") are kept: the model copies names badly, and with a garbled name the relation's
    words still find documents, where "when was" finds nothing (BM25 drops it as stopwords).
    """
    from searchrl.config.rollout import RolloutConfig
    from searchrl.data.synthetic.trajectories import hop_plan, templated_trajectories
    from searchrl.data.tokenize import tokenize_sft
    from searchrl.protocols import get_protocol
    from searchrl.retrieval import BM25Retriever

    retriever = BM25Retriever(world.corpus, show_progress=False)
    rows = world.splits["train"]
    items = templated_trajectories(rows, get_protocol(PROTOCOL), retriever, rollout=RolloutConfig(top_k=1),
                                   tokenizer=tokenizer)
    first_subject = {row["id"]: hop_plan(row)[0].subject for row in rows}
    items = [item for item in items if item["queries"][0].startswith(first_subject[item["id"]])]
    tokenized = tokenize_sft(first_turns(items), tokenizer)
    # tokenize_sft closes every item with a trained EOS; these items stop at the search call, where a rollout
    # hands over to the search engine, so that EOS would teach the model to stop instead.
    return [(ids[:-1], labels[:-1]) for ids, labels in zip(tokenized["input_ids"], tokenized["labels"])]


def opening_queries(model, tokenizer, questions: list[str], max_new_tokens: int = OPENING_TOKENS) -> list[str | None]:
    """The query each question's greedy first turn closes with (search_r1 prompt), or None where it writes none."""
    from searchrl.protocols import get_protocol

    protocol = get_protocol(PROTOCOL)
    prompts = [protocol.build_prompt(q, tokenizer) for q in questions]
    inputs = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    model.train(was_training)
    queries = []
    for text in tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True):
        close = text.find(protocol.query_close)
        query = protocol.extract_query(text[: close + len(protocol.query_close)]) if close >= 0 else None
        queries.append(query or None)  # "" is a closed but empty query: nothing to search for
    return queries


def _batch(examples: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded input_ids, attention_mask and labels."""
    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), pad_id)
    attention_mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX)
    for row, (ids, target) in enumerate(examples):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention_mask[row, : len(ids)] = 1
        labels[row, : len(ids)] = torch.tensor(target)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def trained_token_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Next-token cross-entropy over the trained positions only.

    The output layer over the 49k-token vocabulary is nearly all of this model's compute, and most of each row is
    prompt, which is not trained; so the output layer is applied to the trained positions alone, `LOGIT_ROWS` at a
    time. TRL's SFTTrainer (the notebooks' cold start) runs it on every position and also computes the entropy
    there: tens of times slower per step on this model.
    """
    hidden = model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    targets = batch["labels"][:, 1:]
    trained = targets != IGNORE_INDEX
    head, states, wanted = model.get_output_embeddings(), hidden[:, :-1][trained], targets[trained]
    total = sum(torch.nn.functional.cross_entropy(head(rows), goal, reduction="sum")
                for rows, goal in zip(states.split(LOGIT_ROWS), wanted.split(LOGIT_ROWS)))
    return total / len(wanted)


def teach_to_search(model, tokenizer, examples: list[tuple[list[int], list[int]]], held_out: list[str], *,
                    seed: int = 0) -> dict:
    """Train `model` in place on random batches of `examples` until the greedy openings of at least
    `ENOUGH_SEARCHING` of the `held_out` questions search (checked every `CHECK_EVERY` steps from `FIRST_CHECK`).

    Returns {"steps", "searching" (held-out questions that search), "losses"}; raises RuntimeError when
    `MAX_STEPS` are not enough.
    """
    sampler = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS))
    losses: list[float] = []
    searching = 0
    model.train()
    for step in range(1, MAX_STEPS + 1):
        picked = torch.randint(len(examples), (BATCH_SIZE,), generator=sampler).tolist()
        loss = trained_token_loss(model, _batch([examples[i] for i in picked], tokenizer.pad_token_id))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # the first steps from random weights are wild
        optimizer.step()
        warmup.step()
        losses.append(loss.item())
        if step >= FIRST_CHECK and step % CHECK_EVERY == 0:
            searching = sum(q is not None for q in opening_queries(model, tokenizer, held_out))
            if searching >= ENOUGH_SEARCHING:
                model.eval()
                return {"steps": step, "searching": searching, "losses": losses}
    raise RuntimeError(f"tiny-searcher: after {MAX_STEPS} steps only {searching} of {len(held_out)} held-out "
                       f"questions open with a search call (loss {losses[-1]:.2f}); the recipe in {__name__} needs "
                       "more steps or another learning rate")


def build_tiny_searcher(tiny_policy, seed: int = 0):
    """(model, tokenizer): the tiny random model of `seed` (made by `tiny_policy(seed=...)`, the models package's
    `tiny_test_policy`, which builds the untrained model), trained to open with a search call. The same for a given
    seed on a given machine."""
    from searchrl.data.synthetic import make_world

    model, tokenizer = tiny_policy(seed=seed)
    world = make_world(**WORLD, progress=False)
    dev = world.splits["dev"]
    # Spread over the split, which lists its questions type by type: the check sees every kind of question.
    held_out = [row["question"] for row in dev[:: len(dev) // CHECK_QUESTIONS][:CHECK_QUESTIONS]]
    log = teach_to_search(model, tokenizer, search_openings(world, tokenizer), held_out, seed=seed)
    logger.info("tiny-searcher: %d of %d held-out questions open with a search after %d steps (loss %.2f)",
                log["searching"], len(held_out), log["steps"], log["losses"][-1])
    return model, tokenizer


__all__ = ["RECIPE_VERSION", "build_tiny_searcher", "first_turns", "opening_queries", "search_openings",
           "teach_to_search", "trained_token_loss"]
