"""Per question type: what a training stage changed, and whether searching earned it.

    type_table(exp.results, before="after cold start", after="after RL", no_search="no search")

One row per question type (and one for all questions): F1 and searches per question at both stages, the paired
bootstrap interval of the F1 change, and, when the trained policy was also evaluated with a search budget of 0
(`eval_no_search`), its F1 without search and the paired interval of "with search minus without". A type whose
F1 rose while searching is not shown to help (that interval reaches 0) gained by guessing: comparison questions,
for one, are won half the time by naming one of the two entities in the question. RL on CPU found that shortcut
more than once, so the table flags it rather than leaving it to be read off two numbers. The flag is a lower
bound: a policy that searches once on a comparison question and then names either entity guesses too, yet beats
its own no-search answers if those are worse than a coin flip; read the searches per type beside it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from searchrl.evaluation.evaluate import paired_change
from searchrl.evaluation.protocol import compare_protocols

ALL = "all"
# The overall change once the types flagged as gained by guessing are left out (a row only when any is flagged).
WITHOUT_GUESSED = "all but guessed types"


def _verdict(row: Mapping) -> str:
    if row["questions"] == 0:
        return "no shared questions"
    if row["gained by guessing"]:
        return "gain without search shown to help"
    if row["ΔF1 95% low"] > 0:
        return "gain"
    if row["ΔF1 95% high"] < 0:
        return "loss"
    return "no clear change"


def type_table(results: Mapping, before: str, after: str, no_search: str | None = None) -> pd.DataFrame:
    """One row per question type (index `qtype`, types in order of first appearance), then "all", then, when any
    type is flagged as gained by guessing, "all but guessed types".

    `results` maps stage names to `EvalResult`s (an `Experiment`'s `results`); `before` and `after` name the two
    stages compared, `no_search` (optional) the `after` policy evaluated with a search budget of 0. Columns: n, F1
    and searches/question at both stages, format-valid rate after, "ΔF1" with its paired 95% interval and the
    number of paired questions; with `no_search`: "F1 no search", "search gain" (after minus no search) with its
    paired interval, and "gained by guessing" (F1 rose, yet the search gain's interval reaches 0); and "verdict".
    The stages' protocols compared (`searchrl.evaluation.protocol`) are `table.attrs["protocols"]`: the no-search
    stage differs in max_searches, as it should.
    """
    if not results:
        raise ValueError("type_table needs a non-empty dict {stage name: EvalResult}")
    for stage in (before, after) + ((no_search,) if no_search else ()):
        if stage not in results:
            raise KeyError(f"stage {stage!r} was not evaluated; evaluated stages: {', '.join(results) or 'none'}")
    a = results[before].records.set_index("id")
    b = results[after].records.set_index("id")
    z = results[no_search].records.set_index("id") if no_search else None
    for name, frame in ((before, a), (after, b)) + (((no_search, z),) if no_search else ()):
        if not frame.index.is_unique:
            raise ValueError(f"stage {name!r} holds a question id more than once; the paired intervals need unique ids")
    types = list(dict.fromkeys(list(a["qtype"]) + list(b["qtype"])))

    def row_of(keep) -> dict:
        """The row of the questions `keep` (a frame -> frame filter) selects, at every stage."""
        sa, sb = keep(a), keep(b)
        delta, low, high, n_paired = paired_change(sa["f1"], sb["f1"])
        row = {"n": len(sb), f"F1 {before}": sa["f1"].mean(), f"F1 {after}": sb["f1"].mean(),
               f"searches {before}": sa["searches"].mean(), f"searches {after}": sb["searches"].mean(),
               f"format-valid {after}": sb["format_ok"].astype(float).mean(),
               "ΔF1": delta, "ΔF1 95% low": low, "ΔF1 95% high": high, "questions": n_paired}
        if z is not None:
            sz = keep(z)
            gain, g_low, g_high, _ = paired_change(sz["f1"], sb["f1"])
            row.update({"F1 no search": sz["f1"].mean(), "search gain": gain, "search gain 95% low": g_low,
                        "search gain 95% high": g_high,
                        # searching must be shown to help for a rise to count as learned search
                        "gained by guessing": bool(n_paired and delta > 0 and not g_low > 0)})
        else:
            row["gained by guessing"] = None  # unknown: no no-search evaluation
        row["verdict"] = _verdict(row)
        return row

    rows = {t: row_of(lambda f, t=t: f[f["qtype"] == t]) for t in types}
    rows[ALL] = row_of(lambda f: f)
    guessed = tuple(t for t in types if rows[t]["gained by guessing"])
    if guessed:
        rows[WITHOUT_GUESSED] = row_of(lambda f: f[~f["qtype"].isin(guessed)])
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "qtype"
    stages = (before, after) + ((no_search,) if no_search else ())
    table.attrs["protocols"] = compare_protocols({s: getattr(results[s], "protocol", None) for s in stages})
    return table
