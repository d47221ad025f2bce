"""How much F1 a policy could still gain at its evaluation's settings, per question type.

    headroom(records, max_searches=2)
    python -m searchrl.headroom RUN_DIR [--stage after_cold_start]

RL can only raise F1 where an answer is within reach: a question needing more lookups than the search budget allows
is out of reach (its F1 can rise only by a lucky guess), and a question whose supporting passages the policy did
retrieve but answered wrongly is in reach. Before judging whether an RL run "should" have gained +0.10, compare
that number with the ceiling here: runs on the 2-core CPU found 40% of a balanced evaluation out of reach of two
searches, so the whole gain had to come from the other 60%.

Columns per type (and "all"): n, F1, the share of questions within the search budget (hops <= max_searches), the
share whose supporting passages were all retrieved ("support found"), F1 on those and on the rest, and two
ceilings: "ceiling: budget" (every question within budget answered right, the rest at their current F1) and
"ceiling: retrieval" (every question with its support found answered right, the rest as now): what better reading
alone would give, without better queries.

`query_reach(world, rows, retriever, k)` asks the retriever itself: for each hop of each synthetic question, does
the cold start's own query phrasing (`QUERY_FORMS`) bring the passage stating that fact into the top k? On the
default world BM25's top 1 misses a quarter of single-hop facts (an entity's other passages outrank the one that
states the fact), so `top_k 1` caps F1 before any policy writes a query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

ALL = "all"
# A question counts as having its support found when every supporting passage was retrieved at some search.
FULL_SUPPORT = 0.999


def headroom(records: pd.DataFrame, max_searches: int) -> pd.DataFrame:
    """One row per question type (index `qtype`, in order of first appearance), then "all".

    `records` is an evaluation's per-question frame (`EvalResult.records`, or its JSON lines): it needs `qtype`,
    `f1` and `hops`; `support_recall` adds the retrieval columns (absent, they are NaN). A question with an unknown
    hop count (real datasets) is left out of the budget share and counted at its own F1 in the budget ceiling.
    """
    if max_searches < 0:
        raise ValueError(f"max_searches must be >= 0, got {max_searches}")
    missing = [c for c in ("qtype", "f1", "hops") if c not in records]
    if missing:
        raise KeyError(f"records lack the column(s) {', '.join(missing)}; pass an evaluation's per-question records")
    if records.empty:
        raise ValueError("records are empty: evaluate at least one question first")
    hops = pd.to_numeric(records["hops"], errors="coerce")
    f1 = records["f1"].astype(float)
    within = hops <= max_searches  # NaN hops compare False: unknown is not claimed reachable
    found = (records["support_recall"].astype(float) >= FULL_SUPPORT) if "support_recall" in records else None

    def row(mask: pd.Series) -> dict:
        n = int(mask.sum())
        known = hops[mask].notna()
        out = {"n": n, "F1": f1[mask].mean(),
               "within budget": within[mask][known].mean() if known.any() else float("nan"),
               "ceiling: budget": f1[mask].where(~within[mask], 1.0).mean()}
        if found is not None:
            hit = found[mask]
            out.update({"support found": hit.mean(),
                        "F1 support found": f1[mask][hit].mean() if hit.any() else float("nan"),
                        "F1 support missed": f1[mask][~hit].mean() if (~hit).any() else float("nan"),
                        "ceiling: retrieval": f1[mask].where(~hit, 1.0).mean()})
        return out

    types = list(dict.fromkeys(records["qtype"]))
    rows = {t: row(records["qtype"] == t) for t in types}
    rows[ALL] = row(pd.Series(True, index=records.index))
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "qtype"
    return table


def query_reach(world, rows: Sequence[Mapping], retriever, k: int) -> pd.DataFrame:
    """Per question type (then "all"): the number of hops of `rows` (synthetic-world questions of `world`) and, for
    each templated query phrasing of the cold start (`QUERY_FORMS`), the share of hops whose fact passage is among
    the retriever's top `k`; "chain: form 1" is the share of questions all of whose hops the first phrasing reaches.
    """
    return query_reach_at(world, rows, retriever, [k])[k]


def query_reach_at(world, rows: Sequence[Mapping], retriever, ks: Sequence[int]) -> dict[int, pd.DataFrame]:
    """`query_reach` at each of `ks`, from one search per phrasing at the largest k (a top k is the head of a
    deeper ranking)."""
    from searchrl.data.synthetic.trajectories import QUERY_FORMS, hop_plan

    if not ks or min(ks) < 1:
        raise ValueError(f"k must be >= 1, got {list(ks)}")
    depth = max(ks)
    by_name = {e.name: e for e in world.entities}
    per_hop: list[dict] = []  # rank of the fact passage per phrasing (depth: not found)
    for row in rows:
        hops = hop_plan(row)
        if hops is None:
            raise ValueError(f"row {row.get('id')} records no hop plan: query_reach needs synthetic-world questions")
        for hop in hops:
            target = by_name[hop.subject].fact_docs[hop.key]
            found = retriever.search([form.format(s=hop.subject) for form in QUERY_FORMS[hop.key]], depth)
            ranks = {}
            for i, docs in enumerate(found):
                ids = [d.id for d in docs]
                ranks[f"form {i + 1}"] = ids.index(target) if target in ids else depth
            per_hop.append({"id": row["id"], "qtype": row["metadata"]["type"], **ranks})
    if not per_hop:
        raise ValueError("no rows given")
    ranks = pd.DataFrame(per_hop)
    forms = [c for c in ranks.columns if c.startswith("form ")]
    return {k: _reach_table(ranks.assign(**{c: ranks[c] < k for c in forms}), forms) for k in ks}


def _reach_table(hops: pd.DataFrame, forms: list[str]) -> pd.DataFrame:
    def row_of(frame: pd.DataFrame) -> dict:
        chains = frame.groupby("id")["form 1"].all()
        return {"hops": len(frame), **{c: frame[c].astype(float).mean() for c in forms},
                "chain: form 1": chains.mean()}

    table = pd.DataFrame.from_dict({**{t: row_of(hops[hops["qtype"] == t]) for t in dict.fromkeys(hops["qtype"])},
                                    ALL: row_of(hops)}, orient="index")
    table.index.name = "qtype"
    return table


def run_headroom(run_dir: str | Path, stage: str = "after_cold_start", max_searches: int | None = None
                 ) -> pd.DataFrame:
    """`headroom` of one stage of a run folder: its `trajectories/<stage>.jsonl`, with the budget from its
    params.yaml unless `max_searches` is given."""
    run_dir = Path(run_dir)
    records = _stage_records(run_dir, stage)
    return headroom(records, _budget(run_dir, max_searches))


def _budget(run_dir: Path, max_searches: int | None) -> int:
    """`max_searches` when given, else the run's own from its params.yaml."""
    return max_searches if max_searches is not None else int(_params(run_dir)["max_searches"])


def _stage_records(run_dir: Path, stage: str) -> pd.DataFrame:
    path = run_dir / "trajectories" / f"{stage}.jsonl"
    if not path.is_file():
        have = sorted(p.stem for p in (run_dir / "trajectories").glob("*.jsonl"))
        raise FileNotFoundError(f"{path} does not exist; stages with records here: {', '.join(have) or 'none'}")
    return pd.read_json(path, lines=True)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m searchrl.headroom RUN_DIR`: print the table and save it as `eval/headroom-<stage>.json`."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m searchrl.headroom",
        description="Per question type: how much F1 is within reach of the run's search budget and retrieval.")
    parser.add_argument("run", type=Path, help="run folder")
    parser.add_argument("--stage", default="after_cold_start",
                        help="evaluated stage, a file name under trajectories/ without .jsonl (default: %(default)s)")
    parser.add_argument("--max-searches", type=int, default=None,
                        help="search budget (default: the run's params.yaml)")
    parser.add_argument("--query-reach", type=int, nargs="+", default=None, metavar="K",
                        help="also rebuild the run's synthetic world and retriever and report, for each K, the share "
                             "of hops whose templated query finds the fact's passage in the top K")
    args = parser.parse_args(argv)
    try:
        records = _stage_records(args.run, args.stage)
        tables = {"headroom": headroom(records, _budget(args.run, args.max_searches))}
        if args.query_reach:
            tables["query-reach"] = run_query_reach(args.run, args.query_reach, args.stage, ids=set(records["id"]))
    except (FileNotFoundError, KeyError, ValueError) as err:
        parser.error(str(err))
    for name, table in tables.items():
        out = args.run / "eval" / f"{name}-{args.stage}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        table.reset_index().to_json(out, orient="records", indent=1)
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(table.round(3).to_string())
        print(f"saved {out}\n")
    return 0


def run_query_reach(run_dir: str | Path, ks: Sequence[int], stage: str = "after_cold_start",
                    ids: set[str] | None = None) -> pd.DataFrame:
    """`query_reach` at each of `ks` for the questions of one stage of a synthetic-world run folder (or the question
    `ids` given): the world and retriever are rebuilt from its params.yaml. Columns are prefixed "top <k>: "."""
    from searchrl.config import RunConfig
    from searchrl.data.synthetic import world_of
    from searchrl.retrieval import make_retriever
    from searchrl.retrieval.service import service_options

    run_dir = Path(run_dir)
    cfg = RunConfig.from_params(_params(run_dir))
    if cfg.dataset != "synthetic":
        raise ValueError(f"{run_dir} ran on {cfg.dataset!r}: query reach needs the synthetic world's hop plans")
    world = world_of(cfg)
    retriever = make_retriever(cfg.retriever, world.corpus, **service_options(cfg))  # the run's encoder, timeouts
    if ids is None:
        ids = set(_stage_records(run_dir, stage)["id"])
    rows = [row for split in world.splits.values() for row in split if row["id"] in ids]
    tables = [table.add_prefix(f"top {k}: ") for k, table in query_reach_at(world, rows, retriever, ks).items()]
    table = pd.concat(tables, axis=1)
    return table.loc[:, ~table.columns.str.endswith(": hops") | (table.columns == f"top {ks[0]}: hops")]


def _params(run_dir: Path) -> dict:
    import yaml

    path = run_dir / "params.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} a run folder?")
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


__all__ = ["headroom", "query_reach", "query_reach_at", "run_headroom", "run_query_reach"]


if __name__ == "__main__":
    raise SystemExit(main())
