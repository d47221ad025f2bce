"""`python -m searchrl.config`: the table of every parameter, with its type, default and meaning, then every
registry's names with their descriptions (the registries are imported here, so describe() finds them)."""

import searchrl.protocols
import searchrl.retrieval
import searchrl.rewards
import searchrl.trainer.advantages  # noqa: F401  (the registries describe() lists)
from searchrl.config import RunConfig

print(RunConfig.describe())
