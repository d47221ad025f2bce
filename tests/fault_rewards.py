"""A reward for fault tests that varies between rollouts even for a random policy, so every step has non-zero
advantages and gradients: a resumed run must restore the optimizer's state to match an uninterrupted one."""


def varied(completions, **kwargs):
    return [float(len(str(c)) % 5) / 4 for c in completions]
