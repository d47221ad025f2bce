"""`python -m searchrl.config`: the table of every parameter, with its type, default and meaning."""

from searchrl.config import RunConfig

print(RunConfig.describe())
