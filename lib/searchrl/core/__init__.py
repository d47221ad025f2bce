"""Building blocks that know nothing of search RL: the registry shape, settings checks, intervals, progress bars,
quiet warnings, threads, atomic files and disk checks. Nothing here imports another searchrl package."""
