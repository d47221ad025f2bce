"""Evaluation: the training rollout engine run greedily over a question set and scored per question, the papers'
baselines, R-Search-as-a-Tool, per-type tables and the papers' own table layouts."""
