"""Test doubles shared by the unit tests: a minimal tag protocol, a fake retriever, a scripted generator and a
bag-of-words stand-in for a sentence-transformers encoder."""

from __future__ import annotations

import re
import socket
import zlib

import numpy as np

from searchrl.data.schema import Doc
from searchrl.protocols.base import Parsed, SearchProtocol
from searchrl.rollout import TurnOutput


class MiniProtocol(SearchProtocol):
    """Search-R1-like tags with a one-line prompt, so tests do not depend on any paper's prompt text."""

    name = "mini"

    def build_prompt(self, question, tokenizer=None, *, chat=True):
        text = f"Search with <search>query</search>, answer with <answer>x</answer>. Question: {question}"
        if chat and tokenizer is not None and tokenizer.chat_template:
            return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True)
        return text + "\n"

    def extract_query(self, segment):
        s = segment.rstrip()
        if not s.endswith(self.query_close) or self.query_open not in s:
            return None
        return s[s.rfind(self.query_open) + len(self.query_open): -len(self.query_close)].strip()

    def format_observation(self, docs):
        body = "\n".join(f"Doc {i + 1}(Title: {d.title}) {d.text}" for i, d in enumerate(docs))
        return f"\n\n{self.obs_open}{body}{self.obs_close}\n\n"

    def parse(self, text):
        no_obs = re.sub(r"<information>.*?</information>", "", text, flags=re.DOTALL)
        answers = re.findall(r"<answer>(.*?)</answer>", no_obs, re.DOTALL)
        return Parsed(queries=re.findall(r"<search>(.*?)</search>", no_obs, re.DOTALL),
                      answer=answers[-1].strip() if answers else None, format_ok=bool(answers))


class FakeRetriever:
    """Returns the documents whose title appears in the query, else the first k; counts calls."""

    def __init__(self, n: int = 6):
        self.docs = [Doc(str(i), f"Entity{i}", f"Entity{i} was founded in {1900 + i}.") for i in range(n)]
        self.calls: list[list[str]] = []

    def search(self, queries, k):
        self.calls.append(list(queries))
        out = []
        for q in queries:
            hits = [d for d in self.docs if d.title.lower() in q.lower()]
            out.append((hits + [d for d in self.docs if d not in hits])[:k])
        return out

    def __len__(self):
        return len(self.docs)


# Four rollouts of one question that search 1, 2, 0 and 1 times (the last turn of each ends with EOS): a group whose
# rollouts differ in search count, retrieved spans and length, for trainer tests.
SEARCH_SCRIPTS = [
    ["<search>Entity1 founded</search>", "<answer>1901</answer>"],
    ["<search>Entity2</search>", "<search>Entity3</search>", "<answer>1903</answer>"],
    ["<answer>no idea</answer>"],
    ["<search>Entity4</search>", "<answer>1904</answer>"],
]


class ScriptedGenerator:
    """Plays back fixed turn texts per sequence (keyed by call order within a batch), as a model would emit them."""

    def __init__(self, tokenizer, scripts: list[list[str]], eos_last: bool = True):
        self.tokenizer, self.scripts, self.eos_last = tokenizer, scripts, eos_last
        self.turn = [0] * len(scripts)
        self.calls = 0

    def generate_turn(self, sequences, max_new_tokens):
        # Which script a sequence follows: the scripts are indexed by the prompt's position, recovered from the
        # order of still-active sequences (the engine keeps batch order).
        self.calls += 1
        active = [i for i, t in enumerate(self.turn) if t < len(self.scripts[i])][: len(sequences)]
        outs = []
        for i, budget in zip(active, max_new_tokens):
            text = self.scripts[i][self.turn[i]]
            self.turn[i] += 1
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            last = self.turn[i] == len(self.scripts[i])
            finish = "stop"
            if last and self.eos_last:
                ids, finish = ids + [self.tokenizer.eos_token_id], "eos"
            if len(ids) > budget:
                ids, finish = ids[:budget], "length"
            outs.append(TurnOutput(ids, finish))
        return outs


class Replaying(ScriptedGenerator):
    """The scripted rollouts again for every new batch; counts the batches generated."""

    batches = 0

    def generate_turn(self, sequences, max_new_tokens):
        if self.calls == 0 or all(t == len(s) for t, s in zip(self.turn, self.scripts)):
            self.turn = [0] * len(self.scripts)
            self.batches += 1
        return super().generate_turn(sequences, max_new_tokens)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now (for launched processes and test servers)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def mini_trainer(tmp_path, policy_path, tokenizer, rows, reward_funcs, **settings):
    """A SearchGRPOTrainer for one step on the CPU over `rows`, with MiniProtocol and FakeRetriever, in training mode;
    `settings` add to or override the SearchGRPOConfig fields. Returns the trainer and its prompt dataset."""
    from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

    args = SearchGRPOConfig(**{"output_dir": str(tmp_path), "use_cpu": True, "report_to": "none", "max_steps": 1,
                               "save_strategy": "no", **settings})
    protocol = MiniProtocol()
    data = prompt_dataset(rows, protocol, tokenizer)
    trainer = SearchGRPOTrainer(model=str(policy_path), reward_funcs=reward_funcs, args=args, train_dataset=data,
                                retriever=FakeRetriever(), protocol=protocol, processing_class=tokenizer)
    trainer.model.train()
    return trainer, data


def scripted_trainer(policy_path, tokenizer, args, rows, reward_funcs, generator=None):
    """A SearchGRPOTrainer on `policy_path` with MiniProtocol and FakeRetriever whose rollouts replay `generator`
    (by default the SEARCH_SCRIPTS, once)."""
    from searchrl.rollout import RolloutConfig, SearchRollout
    from searchrl.trainer import SearchGRPOTrainer, prompt_dataset

    protocol = MiniProtocol()
    trainer = SearchGRPOTrainer(model=str(policy_path), reward_funcs=reward_funcs, args=args,
                                train_dataset=prompt_dataset(rows, protocol, tokenizer), retriever=FakeRetriever(),
                                protocol=protocol, processing_class=tokenizer)
    generator = generator or ScriptedGenerator(tokenizer, SEARCH_SCRIPTS)
    trainer._engine = SearchRollout(protocol, trainer.retriever, tokenizer, generator,
                                    RolloutConfig(max_completion_tokens=args.max_completion_length))
    return trainer


def short_sft_items(tokenizer, n=4):
    """Cold-start items with fake two-line documents, so that SFT steps on the tiny model take a fraction of a second."""
    protocol = MiniProtocol()
    obs = protocol.format_observation(FakeRetriever().docs[:2])
    return [{"prompt": protocol.build_prompt("When was Entity1 founded?", tokenizer),
             "segments": [("<search>Entity1</search>", True), (obs, False), ("<answer>1901</answer>", True)]}] * n


class BagOfWordsEncoder:
    """Stands in for a sentence-transformers model: hashes words into a `size`-dimensional bag of words, and keeps
    every text it was asked to encode, in order (`encoded`)."""

    def __init__(self, size: int = 64):
        self.size = size
        self.encoded: list[str] = []

    def get_sentence_embedding_dimension(self) -> int:
        return self.size

    def encode(self, texts, *, batch_size, show_progress_bar, convert_to_numpy, normalize_embeddings):
        self.encoded.extend(texts)
        vectors = np.zeros((len(texts), self.size), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").replace(",", " ").split():
                vectors[row, zlib.crc32(word.encode()) % self.size] += 1.0
        if normalize_embeddings:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors
