"""Generation's two kinds of forward pass, prefill and one-token decode, in three precisions, side by side.

`bf16: true` autocasts RL's training pass and leaves rollouts in float32. This measures whether generation would
gain from bfloat16 as well: float32 weights as the policy is kept, the same weights under bfloat16 autocast, and a
bfloat16 copy of the weights (what a separate inference copy, synced after each update, would run). Each round runs
the three in turn on the same random token batch: one prefill of `--batch` rows of `--prompt` tokens, then
`--decode` single-token steps against the cache it made.

    python benchmarks/bf16_decode.py                     # the bundled policy, 64 rows of 150 tokens, one thread
    python benchmarks/bf16_decode.py --tiny              # random tiny model: checks the script
Results are printed and saved to outputs/benchmarks/bf16_decode-<time>.json.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

from shared_prefix import save_result  # the benchmarks' one result-file writer


def timed_generation(model, ids, decode_steps: int, context) -> tuple[float, float]:
    """(prefill seconds, mean seconds of one decode step) of `model` on `ids` under `context`."""
    import torch

    with torch.no_grad(), context():
        start = time.perf_counter()
        out = model(ids, use_cache=True, logits_to_keep=1)
        prefilled = time.perf_counter()
        cache, token = out.past_key_values, ids[:, -1:]
        for _ in range(decode_steps):
            cache = model(token, past_key_values=cache, use_cache=True).past_key_values
        done = time.perf_counter()
    return prefilled - start, (done - prefilled) / max(decode_steps, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="smollm2-135m-instruct", help="checkpoint folder or bundled name")
    parser.add_argument("--tiny", action="store_true", help="random tiny model")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=150, help="tokens a row before decoding")
    parser.add_argument("--decode", type=int, default=10, help="one-token steps after the prefill")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks"))
    args = parser.parse_args()

    import torch

    from searchrl.models import load_policy, tiny_test_policy

    torch.set_num_threads(args.threads)
    model, _ = tiny_test_policy(seed=0) if args.tiny else load_policy(args.policy, device="cpu")
    model.eval()
    bf16_copy = copy.deepcopy(model).to(torch.bfloat16)
    ids = torch.randint(100, min(20000, model.config.vocab_size), (args.batch, args.prompt),
                        generator=torch.Generator().manual_seed(0))
    modes = {"float32": (model, nullcontext),
             "autocast": (model, lambda: torch.autocast("cpu", dtype=torch.bfloat16)),
             "bf16_weights": (bf16_copy, nullcontext)}
    times: dict[str, dict[str, list[float]]] = {m: {"prefill_s": [], "decode_step_s": []} for m in modes}
    for round_ in range(args.rounds):
        for name, (m, context) in modes.items():
            prefill, step = timed_generation(m, ids, args.decode, context)
            times[name]["prefill_s"].append(prefill)
            times[name]["decode_step_s"].append(step)
            print(f"round {round_}: {name:>12}  prefill {prefill:7.2f} s   decode step {step * 1000:7.0f} ms", flush=True)
    medians = {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}
    base = medians["float32"]
    for name, med in medians.items():
        print(f"{name:>12}: prefill {base['prefill_s'] / med['prefill_s']:.2f}x, "
              f"decode {base['decode_step_s'] / med['decode_step_s']:.2f}x float32's speed")
    path = save_result(args, "bf16_decode", {"times": times, "medians": medians})
    print(f"saved {path}")


if __name__ == "__main__":
    main()
