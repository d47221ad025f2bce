"""The shared-prefix pass gives TRL's per-token log-probabilities, entropies and gradients on a left-padded batch."""

from __future__ import annotations

import copy
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from trl import GRPOTrainer
from trl.trainer.utils import add_fused_lm_head

from searchrl.trainer.shared_prefix import shared_prefix_length, shared_prefix_logps

PAD = 0


def left_padded_batch(prefix, rests, completions, completion_lengths):
    """Prompts = prefix + rest, left-padded; completions right-padded to a common width (masked beyond length)."""
    prompts = [prefix + rest for rest in rests]
    width = max(len(p) for p in prompts)
    c_width = max(len(c) for c in completions)
    ids = torch.full((len(prompts), width + c_width), PAD)
    mask = torch.zeros_like(ids)
    for i, (prompt, completion, n) in enumerate(zip(prompts, completions, completion_lengths, strict=True)):
        ids[i, width - len(prompt):width] = torch.tensor(prompt)
        mask[i, width - len(prompt):width] = 1
        ids[i, width:width + len(completion)] = torch.tensor(completion)
        mask[i, width:width + n] = 1
    return ids, mask, c_width


@pytest.fixture(scope="module")
def fused_policy(tiny_policy):
    model = copy.deepcopy(tiny_policy[0]).float()
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    return model


def trl_pass(model, ids, mask, keep, autocast=nullcontext):
    """TRL's own `_get_per_token_logps_and_entropies` (the reference), outside a trainer."""
    owner = SimpleNamespace(accelerator=SimpleNamespace(autocast=autocast, is_main_process=True))
    logps, entropies, _ = GRPOTrainer._get_per_token_logps_and_entropies(owner, model, ids, mask, keep,
                                                                         compute_entropy=True)
    return logps, entropies


def test_prefix_length_is_what_every_unpadded_prompt_shares():
    ids, mask, keep = left_padded_batch([5, 6, 7, 8], [[9, 10], [9], [11, 12, 13]], [[20, 21]] * 3, [2, 2, 2])
    assert shared_prefix_length(ids, mask, ids.size(1) - keep) == 4
    # identical prompts: all but the last token, whose output predicts the first completion token
    ids, mask, keep = left_padded_batch([5, 6, 7, 8], [[9], [9]], [[20], [21]], [1, 1])
    assert shared_prefix_length(ids, mask, ids.size(1) - keep) == 4
    # rows that differ at once share nothing
    ids, mask, keep = left_padded_batch([], [[5, 6], [7, 6, 5]], [[20], [21]], [1, 1])
    assert shared_prefix_length(ids, mask, ids.size(1) - keep) == 0
    # padding after a real prompt token is not TRL's layout: no sharing is attempted
    mask[0, 0], mask[0, -2] = 1, 0
    assert shared_prefix_length(ids, mask, ids.size(1) - keep) == 0


def test_shared_prefix_pass_matches_trls_values_and_gradients(fused_policy):
    generator = torch.Generator().manual_seed(0)

    def tokens(n):
        return torch.randint(3, 400, (n,), generator=generator).tolist()

    prefix = tokens(24)
    rests = [tokens(3), tokens(7), tokens(1), tokens(5)]
    completions = [tokens(9), tokens(9), tokens(9), tokens(9)]
    ids, mask, keep = left_padded_batch(prefix, rests, completions, [9, 4, 6, 1])

    fused_policy.zero_grad()
    reference, ref_entropy = trl_pass(fused_policy, ids, mask, keep)
    (reference * mask[:, -keep:]).sum().backward()
    ref_grads = [p.grad.clone() for p in fused_policy.parameters()]

    fused_policy.zero_grad()
    shared, entropy = shared_prefix_logps(fused_policy, ids, mask, keep, compute_entropy=True, min_prefix=8)
    (shared * mask[:, -keep:]).sum().backward()
    grads = [p.grad.clone() for p in fused_policy.parameters()]

    assert shared.shape == reference.shape == (4, keep)
    assert torch.allclose(shared, reference, atol=1e-5)
    assert torch.allclose(entropy, ref_entropy, atol=1e-5)
    assert (shared[mask[:, -keep:] == 0] == 0).all()  # masked completion tokens score 0, as TRL's
    for got, want in zip(grads, ref_grads, strict=True):
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)


def test_under_bf16_autocast_the_pass_agrees_with_trls_own(fused_policy):
    # `bf16: true` on a CPU runs RL's pass under bfloat16 autocast: the prefix and the rows' remainders must both run
    # under it (a cache of one precision read by the other fails) and give TRL's values to bfloat16's precision.
    def bf16():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    ids, mask, keep = left_padded_batch(list(range(10, 40)), [[41], [42, 43], [44]], [[50, 51, 52, 53]] * 3, [4, 2, 3])
    runs = []
    for fn in (lambda: trl_pass(fused_policy, ids, mask, keep, autocast=bf16)[0],
               lambda: shared_prefix_logps(fused_policy, ids, mask, keep, autocast=bf16(), min_prefix=8)[0]):
        fused_policy.zero_grad()
        logps = fn()
        (logps * mask[:, -keep:]).sum().backward()
        runs.append((logps.detach(), torch.cat([p.grad.flatten() for p in fused_policy.parameters()])))
    (reference, ref_grad), (shared, grad) = runs
    assert torch.allclose(shared, reference, atol=0.01)
    # both model calls of the shared pass (the prefix, then the remainders) run their projections in bfloat16
    dtypes = []
    linear = next(m for m in fused_policy.modules() if isinstance(m, torch.nn.Linear))
    hook = linear.register_forward_hook(lambda module, args, out: dtypes.append(out.dtype))
    try:
        shared_prefix_logps(fused_policy, ids, mask, keep, autocast=bf16(), min_prefix=8)
    finally:
        hook.remove()
    assert dtypes == [torch.bfloat16, torch.bfloat16]
    assert torch.nn.functional.cosine_similarity(grad.double(), ref_grad.double(), dim=0) > 0.99


def test_too_short_a_shared_prefix_leaves_the_pass_to_trl(fused_policy):
    ids, mask, keep = left_padded_batch([5, 6, 7], [[9, 10], [11]], [[20, 21], [22, 23]], [2, 2])
    assert shared_prefix_logps(fused_policy, ids, mask, keep, min_prefix=16) is None


def test_gradient_checkpointing_leaves_the_pass_to_trl(fused_policy):
    # Checkpointed layers run without the cache in training, so the prefix's keys and values never reach the rows:
    # the shared pass must notice and hand the micro-batch back to TRL's own pass (None) rather than use a short cache.
    model = copy.deepcopy(fused_policy)
    model.activation_checkpointing_enable()
    model.train()
    ids, mask, keep = left_padded_batch(list(range(10, 40)), [[41], [42, 43]], [[50, 51, 52], [53, 54, 55]], [3, 2])
    assert shared_prefix_logps(model, ids, mask, keep, min_prefix=8) is None
    model.activation_checkpointing_disable()  # the same batch without checkpointing takes the shared pass
    shared = shared_prefix_logps(model, ids, mask, keep, min_prefix=8)
    reference, _ = trl_pass(model, ids, mask, keep)
    assert shared is not None and torch.allclose(shared[0], reference, atol=1e-5)


def test_a_lora_policy_gets_the_same_values_and_adapter_gradients(tiny_policy):
    from peft import LoraConfig, get_peft_model

    base = copy.deepcopy(tiny_policy[0]).float()
    add_fused_lm_head(base, temperature=0.7, outputs=("log_probs", "entropy"))  # TRL patches the base model before PEFT wraps it
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    ids, mask, keep = left_padded_batch(list(range(10, 40)), [[41], [42, 43, 44]], [[50, 51, 52], [53, 54, 55]],
                                        [3, 2])
    runs = []
    for fn in (lambda: trl_pass(model, ids, mask, keep)[0], lambda: shared_prefix_logps(model, ids, mask, keep)[0]):
        model.zero_grad()
        logps = fn()
        (logps * mask[:, -keep:]).sum().backward()
        runs.append((logps.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]))
    (reference, ref_grads), (shared, grads) = runs
    assert torch.allclose(shared, reference, atol=1e-5)
    assert ref_grads
    assert all(torch.allclose(g, r, atol=1e-5, rtol=1e-4) for g, r in zip(grads, ref_grads, strict=True))
