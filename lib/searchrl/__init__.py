"""searchrl: train language models with reinforcement learning to search while they reason."""

__version__ = "0.1.0"
