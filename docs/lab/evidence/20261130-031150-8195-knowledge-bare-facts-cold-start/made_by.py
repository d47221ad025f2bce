"""Diagnostic: does a cold start with bare fact statements (sft_fact_in_span False) search for external facts?"""
import json, sys
from searchrl.config import RunConfig
from searchrl.experiment import Experiment

nb = json.load(open("notebooks/ablate_knowledge.ipynb"))
cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
ns = {}
exec("".join(cell["source"]), ns)
params = {k: v for k, v in ns.items() if not k.startswith("__")}
extra = dict(a.split("=", 1) for a in sys.argv[1:])
extra = {k: json.loads(v) for k, v in extra.items()}
cfg = RunConfig.from_params(params, "params/ablate_knowledge/cpu.yaml", seed=0, seeds=[0], micro_batch_size=2,
                            eval_batch_size=10, torch_threads=1, output_root="/root/searchrl-outputs", **extra)
exp = Experiment(cfg, notebook="diag_knowledge")
print(exp.run_dir, flush=True)
model = exp.load_model()
model = exp.cold_start(model)
res = exp.evaluate(model, "after cold start")
print(res.summary())
df = res.records
df["no_search"] = df["searches"] == 0
print(df.groupby("knowledge")[["em", "f1", "searches", "no_search", "internal_answers", "format_ok"]].mean())
print(df.groupby("knowledge").size())
exp.finish()
