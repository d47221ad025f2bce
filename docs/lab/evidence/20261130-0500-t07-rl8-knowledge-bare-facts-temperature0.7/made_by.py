"""Diagnostic: RL from the bare-fact cold start (made by know_cold.py) with changed rollout settings: does it keep
searching past step 4? Usage: python know_rl.py <cold-start run dir> <new run dir> key=json ..."""
import json, shutil, sys
from pathlib import Path
from searchrl.config import RunConfig
from searchrl.experiment import Experiment

src, dest = Path(sys.argv[1]), Path(sys.argv[2])
extra = {k: json.loads(v) for k, v in (a.split("=", 1) for a in sys.argv[3:])}
nb = json.load(open("notebooks/ablate_knowledge.ipynb"))
cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
ns = {}
exec("".join(cell["source"]), ns)
params = {k: v for k, v in ns.items() if not k.startswith("__")}
shutil.copytree(src / "checkpoints" / "cold_start", dest / "checkpoints" / "cold_start")
cfg = RunConfig.from_params(params, "params/ablate_knowledge/cpu.yaml", seed=0, seeds=[0], eval_batch_size=10,
                            torch_threads=1, output_root=str(dest.parent), resume=True, sft_fact_in_span=False,
                            **extra)
exp = Experiment(cfg, notebook="diag_knowledge", run_dir=dest)
model = exp.cold_start(exp.load_model())
model = exp.train_rl(model)
h = exp.history.to_frame()
print(h[[c for c in ("step", "search/searches_per_sample", "reward") if c in h]].round(3).to_string())
exp.finish()
