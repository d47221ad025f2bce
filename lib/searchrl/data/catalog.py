"""The papers' datasets and corpora by name: what each is, where it comes from, and where its prepared files live.

`dataset:` and `corpus:` in a params file take an entry's name as well as a path. A name is resolved in the data
folders (`data_dirs()`): first `$SEARCHRL_DATA` (default `~/.cache/searchrl/data`), where `searchrl data fetch` and
`searchrl data prepare` write, then `../shared/data` beside the repository when it exists (a local copy of real QA
files). `resolve_questions` and `resolve_corpus` are the one place a name becomes files; a name whose files are
absent raises `MissingDataError`, one line naming the `searchrl data fetch` command.

Prepared layout (relative to a data folder): a question entry holds one jsonl per split, read by
`searchrl.data.loaders.load_qa`; a corpus entry holds `<name>/corpus.jsonl` (id, title, text, or FlashRAG's
contents), read by `load_corpus`; an index entry holds its index file. An entry lists each split's candidate paths,
the first one present wins, so that the `../shared/data` copies (their own file names) are found too.

Sizes are approximate unless the entry's file carries a sha256; hub files are checked against their size and, on
the Hugging Face hub, the sha256 the hub reports as the file's etag (`searchrl.data.hub`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CATALOG",
    "DATA_ENV_VAR",
    "DEFAULT_DATA_DIR",
    "FLASHRAG_HUB_ID",
    "FLASHRAG_SPLITS",
    "DataEntry",
    "MissingDataError",
    "RemoteFile",
    "data_dirs",
    "entry",
    "entry_files",
    "eval_split_of",
    "fetch_command",
    "flashrag_url",
    "is_catalog_name",
    "missing_data",
    "resolve_corpus",
    "resolve_index",
    "resolve_questions",
    "write_dir",
]

DATA_ENV_VAR = "SEARCHRL_DATA"
DEFAULT_DATA_DIR = Path("~/.cache/searchrl/data")
HF = "https://huggingface.co"
FLASHRAG_HUB_ID = "RUC-NLPIR/FlashRAG_datasets"
# The FlashRAG datasets of the papers (and a few neighbours) and the splits the hub holds for them.
FLASHRAG_SPLITS: dict[str, tuple[str, ...]] = {
    "nq": ("train", "dev", "test"),
    "triviaqa": ("train", "dev", "test"),
    "popqa": ("test",),
    "hotpotqa": ("train", "dev"),
    "2wikimultihopqa": ("train", "dev"),
    "musique": ("train", "dev"),
    "bamboogle": ("test",),
    "squad": ("train", "dev"),
    "narrativeqa": ("train", "dev", "test"),
}
GB, MB = 10**9, 10**6


class MissingDataError(FileNotFoundError):
    """A catalogue entry a run needs is not in any data folder; the message is one line with the command to run."""


@dataclass(frozen=True)
class RemoteFile:
    """One file to download: its URL, where it lands inside the entry's `raw/` folder, and what to check after."""

    url: str
    path: str
    size: int | None = None
    """Expected bytes; None: take the server's Content-Length."""
    sha256: str | None = None
    """Expected digest; None: the hub's sha256 etag when it gives one, else the size only."""


@dataclass(frozen=True)
class DataEntry:
    """One named dataset, corpus or index."""

    name: str
    kind: str
    """questions, corpus or index."""
    description: str
    source: str
    """Where it comes from, in words (hub repo id, paper)."""
    licence: str
    approx_bytes: int
    """Download size, roughly (the prepared files may be larger: gzip, parquet)."""
    layout: dict[str, tuple[str, ...]]
    """Split (or "corpus" / "index") -> candidate paths relative to a data folder; the first present wins."""
    files: tuple[RemoteFile, ...] = ()
    """What `fetch` downloads into <data>/<name>/raw/; empty: nothing to download (`manual` says how to get it)."""
    prepare: str = ""
    """The `searchrl.data.prepare` step that turns raw/ into the layout; empty: the downloads are the layout."""
    profiles: tuple[str, ...] = ()
    """The gpu profiles (params/<notebook>/gpu.yaml) that name this entry."""
    needs: tuple[str, ...] = ()
    """Entries `prepare` reads from (fetched first)."""
    manual: str = ""
    """For an entry no URL serves as a plain file: how to get its files by hand."""
    default_corpus: str = ""
    """The corpus a question entry is searched over when `corpus` is empty."""

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.layout)


def flashrag_url(dataset: str, split: str) -> str:
    return f"{HF}/datasets/{FLASHRAG_HUB_ID}/resolve/main/{dataset}/{split}.jsonl"


def _flashrag(dataset: str, profiles: tuple[str, ...] = (), approx: int = 50 * MB) -> DataEntry:
    splits = FLASHRAG_SPLITS[dataset]
    return DataEntry(
        name=f"flashrag-{dataset}", kind="questions",
        description=f"FlashRAG's {dataset} ({', '.join(splits)}) in its jsonl format (id, question, golden_answers)",
        source=f"hf:{FLASHRAG_HUB_ID} {dataset}/<split>.jsonl", licence="the dataset's own (see FlashRAG's card)",
        approx_bytes=approx,
        layout={s: (f"flashrag-{dataset}/{s}.jsonl", f"flashrag/{dataset}/{s}.jsonl") for s in splits},
        # raw/<split>.jsonl is checked and copied into place by prepare "move"
        files=tuple(RemoteFile(flashrag_url(dataset, s), f"{s}.jsonl") for s in splits),
        prepare="move", profiles=profiles, default_corpus="wiki-18",
    )


_SR1 = ("ablate_mask", "ablate_topk", "base_vs_instruct", "ablate_algorithm")
_R1S = ("ablate_reward", "ablate_stages", "sft_vs_rl", "ablate_data", "ablate_algorithm")
_HOTPOT = "http://curtis.ml.cmu.edu/datasets/hotpot"  # the HotpotQA site's download links
_R1S_GITHUB = "https://raw.githubusercontent.com/RUCAIBox/R1-Searcher/main/data/training_set"  # unverified path



def _r1_searcher_stage(stage: int, count: str, approx: int, profiles: tuple[str, ...]) -> DataEntry:
    return DataEntry(
        name=f"r1searcher-stage{stage}", kind="questions",
        description=f"R1-Searcher's stage-{stage} RL questions ({count} HotpotQA + 2Wiki, difficulty-selected)",
        source=f"github:RUCAIBox/R1-Searcher data/training_set/stage_{stage}.jsonl",
        licence="MIT (questions: HotpotQA CC BY-SA 4.0, 2Wiki Apache-2.0)", approx_bytes=approx,
        layout={"train": (f"r1searcher-stage{stage}/train.jsonl", f"r1-searcher/training_set/stage_{stage}.jsonl")},
        files=(RemoteFile(f"{_R1S_GITHUB}/stage_{stage}.jsonl", "train.jsonl"),), prepare="move",
        profiles=profiles, default_corpus="kilt-2019",
    )


_ENTRIES = (
    DataEntry(
        name="nq_hotpotqa_train", kind="questions",
        description="NQ train + HotpotQA train as Search-R1 merged them (79,168 + 90,447 = 169,615 questions)",
        source="hf:PeterJinGo/nq_hotpotqa_train train.parquet, test.parquet (Search-R1 README)",
        licence="NQ CC BY-SA 3.0, HotpotQA CC BY-SA 4.0", approx_bytes=100 * MB,  # unverified size
        layout={"train": ("nq_hotpotqa_train/train.jsonl",), "test": ("nq_hotpotqa_train/test.jsonl",)},
        files=(RemoteFile(f"{HF}/datasets/PeterJinGo/nq_hotpotqa_train/resolve/main/train.parquet", "train.parquet"),
               RemoteFile(f"{HF}/datasets/PeterJinGo/nq_hotpotqa_train/resolve/main/test.parquet", "test.parquet")),
        prepare="search_r1_parquet", profiles=_SR1, default_corpus="wiki-18",
    ),
    _flashrag("nq", ("response_length",), 120 * MB),
    _flashrag("hotpotqa", (), 150 * MB),
    _flashrag("2wikimultihopqa", (), 120 * MB),
    _flashrag("musique", (), 80 * MB),
    _flashrag("triviaqa", (), 100 * MB),
    _flashrag("popqa", (), 5 * MB),
    _flashrag("bamboogle", (), 1 * MB),
    DataEntry(
        name="hotpotqa-distractor", kind="questions",
        description="HotpotQA distractor rows with their 10 context paragraphs (2 gold + 8 distractors)",
        source="HotpotQA (Yang et al. 2018), hotpotqa.github.io; ../shared/data holds 300/300/500 rows",
        licence="CC BY-SA 4.0", approx_bytes=600 * MB,
        # train 90,447 and dev 7,405 from the official files; the test split (answers withheld upstream) is the
        # 500-row copy in ../shared/data only
        layout={s: (f"hotpotqa-distractor/hotpotqa_{s}.jsonl",) for s in ("train", "dev", "test")},
        files=(RemoteFile(f"{_HOTPOT}/hotpot_train_v1.1.json", "train.json", size=566_426_227),  # unverified size
               RemoteFile(f"{_HOTPOT}/hotpot_dev_distractor_v1.json", "dev.json", size=46_320_117)),  # unverified
        prepare="json_to_jsonl", profiles=("quickstart",), default_corpus="hotpotqa-pool",
    ),
    _r1_searcher_stage(1, "350 medium", 400_000, ("ablate_reward", "ablate_stages", "sft_vs_rl", "ablate_algorithm",
                                                  "ablate_knowledge")),
    _r1_searcher_stage(2, "8,148", 1_400_000, (*_R1S, "ablate_knowledge")),
    DataEntry(
        name="ircot-2wiki", kind="questions",
        description="2WikiMultiHopQA as IRCoT split it (the training questions R-Search uses)",
        source="IRCoT processed_data.zip (StonyBrookNLP/ircot download/processed_data.sh, a Google Drive file)",
        licence="Apache-2.0", approx_bytes=300 * MB,  # unverified size
        layout={"train": ("ircot-2wiki/train.jsonl",), "dev": ("ircot-2wiki/dev.jsonl",)},
        manual=("run StonyBrookNLP/ircot's download/processed_data.sh and copy processed_data/2wikimultihopqa/"
                "{train,dev}.jsonl to <data>/ircot-2wiki/raw/, then `searchrl data prepare ircot-2wiki`"),
        prepare="ircot", profiles=("ablate_evidence", "ablate_algorithm"), default_corpus="ircot-2wiki-corpus",
    ),
    DataEntry(
        name="wiki-18", kind="corpus",
        description="the 2018 Wikipedia dump of DPR as Search-R1 ships it: 21M 100-word passages (id, contents)",
        source="hf:PeterJinGo/wiki-18-corpus wiki-18.jsonl.gz (Search-R1 README)",
        licence="CC BY-SA 3.0 (Wikipedia)", approx_bytes=5 * GB,  # unverified size (about 14 GB unpacked)
        layout={"corpus": ("wiki-18/corpus.jsonl",)},
        files=(RemoteFile(f"{HF}/datasets/PeterJinGo/wiki-18-corpus/resolve/main/wiki-18.jsonl.gz",
                          "wiki-18.jsonl.gz"),),
        prepare="gunzip", profiles=(*_SR1, "response_length"),
    ),
    DataEntry(
        name="wiki-18-e5-index", kind="index",
        description="Search-R1's flat E5 (e5-base-v2) faiss index over wiki-18, for a retrieval service",
        source="hf:PeterJinGo/wiki-18-e5-index part_aa, part_ab, concatenated to e5_Flat.index (Search-R1 README)",
        licence="CC BY-SA 3.0 (Wikipedia)", approx_bytes=65 * GB,  # 21M x 768 float32; unverified
        layout={"index": ("wiki-18-e5-index/e5_Flat.index",)},
        files=tuple(RemoteFile(f"{HF}/datasets/PeterJinGo/wiki-18-e5-index/resolve/main/{p}", p)
                    for p in ("part_aa", "part_ab")),
        prepare="concatenate", profiles=(*_SR1, "response_length"), needs=("wiki-18",),
    ),
    DataEntry(
        name="kilt-2019", kind="corpus",
        description="KILT's 2019 Wikipedia snapshot cut into 100-word passages with titles (about 29M)",
        source="KILT knowledge source (facebookresearch/KILT): dl.fbaipublicfiles.com/KILT/kilt_knowledgesource.json",
        licence="CC BY-SA 3.0 (Wikipedia)", approx_bytes=35 * GB,  # unverified size
        layout={"corpus": ("kilt-2019/corpus.jsonl",)},
        files=(RemoteFile("http://dl.fbaipublicfiles.com/KILT/kilt_knowledgesource.json", "kilt_knowledgesource.json"),),
        prepare="kilt_passages", profiles=(*_R1S, "ablate_knowledge"),
    ),
    DataEntry(
        name="ircot-2wiki-corpus", kind="corpus",
        description="IRCoT's 2WikiMultiHopQA corpus: the context paragraphs of the raw 2Wiki train and dev sets",
        source="2WikiMultiHopQA raw data (Ho et al. 2020; IRCoT download/raw_data.sh, a Dropbox zip)",
        licence="Apache-2.0", approx_bytes=700 * MB,  # unverified size
        layout={"corpus": ("ircot-2wiki-corpus/corpus.jsonl",)},
        manual=("run StonyBrookNLP/ircot's download/raw_data.sh and copy raw_data/2wikimultihopqa/{train,dev}.json "
                "to <data>/ircot-2wiki-corpus/raw/, then `searchrl data prepare ircot-2wiki-corpus`"),
        prepare="pool_raw", profiles=("ablate_evidence", "ablate_algorithm"),
    ),
    DataEntry(
        name="hotpotqa-pool", kind="corpus",
        description="every context paragraph of the hotpotqa-distractor rows (train, dev, test), deduplicated",
        source="built by `prepare` from hotpotqa-distractor", licence="CC BY-SA 4.0", approx_bytes=5 * MB,
        layout={"corpus": ("hotpotqa-pool/corpus.jsonl",)}, prepare="pool_hotpotqa",
        profiles=("quickstart",), needs=("hotpotqa-distractor",),
    ),
)

CATALOG: dict[str, DataEntry] = {e.name: e for e in _ENTRIES}


def entry(name: str) -> DataEntry:
    """The entry called `name`; KeyError with the nearest name for a typo."""
    if name not in CATALOG:
        import difflib

        close = difflib.get_close_matches(name, CATALOG, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"no data entry {name!r}{hint}; `searchrl data list` shows them all")
    return CATALOG[name]


def is_catalog_name(value: str) -> bool:
    return value in CATALOG


def write_dir() -> Path:
    """Where fetch and prepare write: $SEARCHRL_DATA, else ~/.cache/searchrl/data."""
    return Path(os.environ.get(DATA_ENV_VAR) or DEFAULT_DATA_DIR).expanduser()


def data_dirs() -> list[Path]:
    """The folders a name is looked up in, in order: `write_dir()`, then ../shared/data beside the repository."""
    dirs = [write_dir()]
    shared = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    if shared.is_dir() and shared.resolve() != dirs[0].resolve():
        dirs.append(shared)
    return dirs


def entry_files(name: str, dirs: list[Path] | None = None) -> dict[str, Path | None]:
    """Each part (split, corpus, index) of the entry -> the first existing file, or None when it is absent."""
    found: dict[str, Path | None] = {}
    for part, candidates in entry(name).layout.items():
        found[part] = next((d / c for d in (dirs or data_dirs()) for c in candidates if (d / c).is_file()), None)
    return found


def fetch_command(name: str) -> str:
    e = entry(name)
    steps = [f"searchrl data fetch {n}" for n in (*e.needs, name) if CATALOG[n].files or n == name]
    if e.prepare:
        steps.append(f"searchrl data prepare {name}")
    return " && ".join(dict.fromkeys(steps))


def _part(name: str, part: str, dirs: list[Path] | None) -> Path:
    e = entry(name)
    if part not in e.layout:
        raise ValueError(f"{name} has no {part!r} split; it has {', '.join(e.layout)}")
    path = entry_files(name, dirs)[part]
    if path is None:
        where = ", ".join(str(d) for d in (dirs or data_dirs()))
        raise MissingDataError(f"{e.kind} {name!r} ({part}) is not in {where}: run `{fetch_command(name)}`")
    return path


def resolve_questions(dataset: str, split: str = "train", dirs: list[Path] | None = None) -> Path:
    """The question file of `dataset` (a catalogue name or a path) for `split`. A path is returned as it is (its
    existence is the loader's to check); a name whose file is absent raises MissingDataError."""
    if not is_catalog_name(dataset):
        return Path(dataset).expanduser()
    return _part(dataset, split, dirs)


def resolve_corpus(corpus: str, dataset: str = "", dirs: list[Path] | None = None) -> Path:
    """The passage file of `corpus` (a name or a path); empty: the default corpus of the catalogue `dataset`."""
    if not corpus and is_catalog_name(dataset) and entry(dataset).default_corpus:
        corpus = entry(dataset).default_corpus
    if not corpus:
        raise ValueError("dataset is a file, so `corpus` must name a passage file (jsonl or tsv) or a corpus entry")
    if not is_catalog_name(corpus):
        return Path(corpus).expanduser()
    if entry(corpus).kind != "corpus":
        raise ValueError(f"{corpus!r} is a {entry(corpus).kind} entry, not a corpus")
    return _part(corpus, "corpus", dirs)


def resolve_index(index: str, dirs: list[Path] | None = None) -> Path:
    """The faiss index file of `index` (a catalogue index name, e.g. wiki-18-e5-index, or a path)."""
    if not is_catalog_name(index):
        return Path(index).expanduser()
    if entry(index).kind != "index":
        raise ValueError(f"{index!r} is a {entry(index).kind} entry, not an index")
    return _part(index, "index", dirs)


def eval_split_of(dataset: str, eval_split: str) -> str | None:
    """The split a catalogue `dataset` evaluates on: `eval_split` when the entry has it (and it is not the training
    split); None for a file or an entry without it, whose evaluation questions are held out of the training file."""
    if not is_catalog_name(dataset):
        return None
    splits = entry(dataset).layout
    return eval_split if eval_split in splits and eval_split != "train" else None


def missing_data(dataset: str, corpus: str, eval_split: str = "test", dirs: list[Path] | None = None, *,
                 index: str = "", stage1_dataset: str = "") -> str | None:
    """The one-line reason a run's named data is absent (naming the fetch command), or None when every catalogue
    name resolves (the dataset, its evaluation split and corpus, a prebuilt `index`, stage 1's own questions); paths
    and the synthetic world are the schema's to check."""
    try:
        if dataset != "synthetic":
            resolve_questions(dataset, "train", dirs)
            split = eval_split_of(dataset, eval_split)
            if split:
                resolve_questions(dataset, split, dirs)
            try:
                resolve_corpus(corpus, dataset, dirs)
            except ValueError:  # an empty corpus for a file (MissingDataError is no ValueError): the schema says so
                pass
        if index:
            resolve_index(index, dirs)
        if stage1_dataset:
            resolve_questions(stage1_dataset, "train", dirs)
    except MissingDataError as err:
        return str(err)
    return None
