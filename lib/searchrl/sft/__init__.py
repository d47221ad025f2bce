"""The cold start before RL: trajectories, tokenized with retrieved tokens masked, trained with TRL's SFTTrainer.

tokenize.py   items -> input_ids / labels (labels -100 on the prompt and the retrieved tokens)
rejection.py  the policy's own correct trajectories, through evaluation's rollout loop
cold_start.py sft_train(model, tokenizer, items, SFTConfig)

Written trajectories for the synthetic world live with the world: `searchrl.data.synthetic.trajectories` (and, for a
world with a knowledge split, `fact_statement_items`: the statements that teach the model its internal facts).
"""

from searchrl.data.synthetic.trajectories import fact_statement_items, templated_trajectories
from searchrl.data.tokenize import IGNORE_INDEX, tokenize_sft
from searchrl.sft.cold_start import make_sft_trainer, sft_train
from searchrl.sft.rejection import rejection_sampled_trajectories

__all__ = ["IGNORE_INDEX", "fact_statement_items", "make_sft_trainer", "rejection_sampled_trajectories", "sft_train",
           "templated_trajectories", "tokenize_sft"]
