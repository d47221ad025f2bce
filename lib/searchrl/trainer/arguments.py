"""From a RunConfig to the TRL argument objects: SearchGRPOConfig for RL, SFTConfig for the cold start.

Device and precision are decided once (`hardware_args`) for both, so the cold start and RL always run where and how
the run says. bf16 is honoured on a CPU too: it runs as bfloat16 autocast, which is fast on CPUs with native bf16
instructions (AVX512-BF16, AMX) and slow on others, so it is the user's choice, not switched off behind their back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from searchrl.config import RunConfig


def hardware_args(cfg: RunConfig) -> dict[str, Any]:
    """What a transformers Trainer needs to know of the machine and its memory, from the run's `device`, `bf16` and
    `activation_checkpointing`: the cold start and RL take the same values."""
    on_cpu = cfg.device == "cpu" or (cfg.device == "auto" and not torch.cuda.is_available())
    return {"use_cpu": on_cpu, "bf16": cfg.bf16, "activation_checkpointing": cfg.activation_checkpointing}


def grpo_args(cfg: RunConfig, output_dir: str | Path, *, max_steps: int | None = None,
              reward_weights: list[float] | None = None, rollout_log_dir: str | Path | None = None):
    """The SearchGRPOConfig of this run: `max_steps` (default `rl_steps`) and the reward weights of one stage;
    training rollouts are written to `rollout_log_dir` when given and the run's `save_train_rollouts` is on."""
    from searchrl.config.memorization import MemorizationConfig
    from searchrl.trainer.grpo_config import SearchGRPOConfig

    # The memorization settings travel as their own object, like the rollout's; a RunConfig that does not declare
    # them yet trains without memorization.
    memorization = MemorizationConfig.from_object(cfg) if isinstance(cfg, MemorizationConfig) else MemorizationConfig()

    # One generation batch of prompts_per_step x num_generations rollouts per accumulation step, split into
    # micro-batches for the forward and backward passes: TRL generates once per `steps_per_generation` micro-steps
    # and scales the loss to the whole window, so the update does not depend on the split. The run's own
    # steps_per_generation makes one generation batch serve that many optimizer steps of `windows` micro-steps.
    step = cfg.prompts_per_step * cfg.num_generations
    micro = cfg.micro_batch_size or step
    windows = cfg.gradient_accumulation_steps * (step // micro)
    return SearchGRPOConfig(
        output_dir=str(output_dir), seed=cfg.seed, max_steps=cfg.rl_steps if max_steps is None else max_steps,
        learning_rate=cfg.learning_rate, lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_ratio,  # transformers reads a warmup_steps below 1 as a share of max_steps
        num_generations=cfg.num_generations, num_iterations=cfg.num_iterations,
        per_device_train_batch_size=micro, gradient_accumulation_steps=windows,
        steps_per_generation=windows * cfg.steps_per_generation,
        beta=cfg.beta, loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards, rollout=cfg.rollout_config(), memorization=memorization, protocol=cfg.protocol,
        mask_retrieved=cfg.mask_retrieved, advantage_estimator=cfg.advantage_estimator,
        reward_kl_coef=cfg.reward_kl_coef, value_lr=cfg.value_lr,
        value_lr_scheduler_type=cfg.value_lr_scheduler_type, value_warmup_ratio=cfg.value_warmup_ratio,
        drop_zero_variance=cfg.drop_zero_variance, skip_empty_steps=cfg.skip_empty_steps,
        dynamic_sampling=cfg.dynamic_sampling, dynamic_sampling_draw=cfg.dynamic_sampling_draw,
        dynamic_sampling_max_draws=cfg.dynamic_sampling_max_draws, prompt_selection=cfg.prompt_selection,
        stratified_type_weights=dict(cfg.train_type_weights),
        length_grouped_micro_batches=cfg.length_grouped_micro_batches, shared_prefix=cfg.shared_prefix,
        train_top_layers=cfg.train_top_layers,
        rollout_log_dir=str(rollout_log_dir) if rollout_log_dir and cfg.save_train_rollouts else "",
        reward_weights=reward_weights, logging_steps=cfg.logging_steps, save_steps=cfg.save_steps,
        save_strategy="steps", save_total_limit=2, report_to=cfg.report_to, use_vllm=cfg.use_vllm,
        vllm_mode=cfg.vllm_mode, vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
        vllm_server_base_url=cfg.vllm_server_url or None,
        disable_tqdm=True,  # the run's own step bar replaces TRL's (progress.py)
        **hardware_args(cfg),
    )


def lora_config(cfg: RunConfig):
    """The LoRA adapter of this run (`use_peft`, `lora_r`, `lora_alpha`, every linear layer), or None."""
    if not cfg.use_peft:
        return None
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, task_type="CAUSAL_LM", target_modules="all-linear")


def sft_args(cfg: RunConfig, output_dir: str | Path, *, batch_size: int | None = None, max_length: int = 1024,
             num_processes: int | None = None, checkpoints: bool = False):
    """The SFTConfig of this run's cold start (the run saves the final model itself; with `checkpoints` the trainer
    also keeps its latest state every `save_steps` steps, so that a resumed run continues the cold start).
    `batch_size` (default: the run's sft_batch_size) examples make one optimizer step, however many processes share it
    (`num_processes`, default: those
    of this launch), so a cold start under `accelerate launch` takes the same steps as in one process; each process's
    share runs in micro-batches of at most `micro_batch_size` (the largest divisor that fits) when the run sets one."""
    from trl import SFTConfig

    if num_processes is None:
        from accelerate import PartialState

        num_processes = PartialState().num_processes
    batch_size = cfg.sft_batch_size if batch_size is None else batch_size
    if batch_size % num_processes:
        raise ValueError(f"the cold start's batch of {batch_size} examples cannot be split over {num_processes} "
                         f"processes; launch a number of processes that divides {batch_size}")
    batch_size //= num_processes
    micro = batch_size
    if 0 < cfg.micro_batch_size < batch_size:
        micro = max(d for d in range(1, cfg.micro_batch_size + 1) if batch_size % d == 0)
    return SFTConfig(
        output_dir=str(output_dir), num_train_epochs=cfg.sft_epochs, learning_rate=cfg.sft_learning_rate,
        per_device_train_batch_size=micro, gradient_accumulation_steps=batch_size // micro, max_length=max_length,
        seed=cfg.seed, logging_steps=5,
        train_sampling_strategy="group_by_length" if cfg.sft_group_by_length else "random",
        report_to=cfg.report_to, save_strategy="steps" if checkpoints and cfg.save_steps > 0 else "no",
        save_steps=max(1, cfg.save_steps), save_total_limit=1,
        # hardware_args sets activation checkpointing: SFTConfig's default (on) only costs a small model compute.
        disable_tqdm=True,
        **hardware_args(cfg),
    )


__all__ = ["grpo_args", "hardware_args", "lora_config", "sft_args"]
