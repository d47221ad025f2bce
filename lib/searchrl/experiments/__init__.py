"""What a notebook calls: one experiment (data, retriever, cold start, RL, evaluation), ablations, the evaluation
suite, data selection, and the drivers that run a notebook or train without one."""
