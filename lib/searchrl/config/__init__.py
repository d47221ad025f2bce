"""RunConfig: the one parameter schema shared by notebooks, parameter files and the runner.

Every run is described by a flat set of typed values. They come from, in increasing precedence:

1. the defaults below,
2. parameter files (``params/<notebook>/<profile>.yaml``), in the order given,
3. a dict (in a notebook: the values of its ``parameters`` cell),
4. keyword overrides.

Unknown keys and values of the wrong type raise :class:`ConfigError` before anything runs, naming the key, where
it came from and, for a typo, the nearest valid key. Papermill on its own only warns about an unknown parameter,
which is how a misspelt ``lerning_rate`` silently trains with the default.

In a notebook, the cell after the ``parameters`` cell reads::

    cfg = RunConfig.from_globals(globals())

which picks the globals named like fields (see :meth:`RunConfig.from_globals`). Each field's documentation is the
string literal written right under it; :data:`FIELD_DOCS` is parsed from the source so ``RunConfig.describe()`` and
the tests can see it.

Names that belong to registries (model, protocol, retriever, rewards, advantage estimator) are checked by those
registries when the run builds its parts; this package checks types, ranges and the options that TRL fixes.
Conversion to the trainer's configuration lives with the trainer (``searchrl.trainer``), not here.
The package by concern:

- the fields, by section: the run's own (``sections``, ``rl``, ``evaluation``) and each mechanism's (``rollout``,
  ``service``, ``web_search``, ``knowledge``, ``memorization``, ``evidence``, ``difficulty``, ``health``, ``probe``),
  joined in schema order in ``schema`` (``RunFields``, :data:`FIELD_DOCS`, :data:`FIELD_SECTIONS`);
- reading values: ``loading`` (the YAML loader, :func:`parse_scalar`, :func:`load_params_file`, type coercion);
- the checks of a complete parameter set: ``checks`` (and each mechanism's module);
- which notebooks take which keys (the eval suite's, the ablations' and the report's sections are theirs only):
  ``notebooks``;
- :class:`RunConfig` and what needs it (an ablation's arms, cold-start keys, what a resume changes): ``run``;
- names from the registries (``names``, ``rewards``, ``models``), the ablation's arms and claims (``ablation``).
"""

from __future__ import annotations

from searchrl.config.checks import CHOICES
from searchrl.config.difficulty import DifficultyConfig
from searchrl.config.errors import ConfigError
from searchrl.config.evaluation import (
    AblationSettings,
    BenchmarkSettings,
    EvalSetSettings,
    EvalSettings,
    ReportSettings,
    eval_decoding,
)
from searchrl.config.evidence import EvidenceConfig
from searchrl.config.health import HealthConfig
from searchrl.config.knowledge import KnowledgeConfig
from searchrl.config.loading import RESERVED_YAML_KEYS, load_params_file, parse_scalar, yaml_loader
from searchrl.config.memorization import MemorizationConfig
from searchrl.config.notebooks import NOTEBOOKS, drop_unread_defaults, notebook_keys, takes_key
from searchrl.config.probe import ProbeConfig
from searchrl.config.rl import RLSettings
from searchrl.config.rollout import RolloutConfig
from searchrl.config.run import (
    BOOKKEEPING_SETTINGS,
    COMPUTE_ONLY_SETTINGS,
    RunConfig,
    arm_names,
    arm_problems,
    cold_start_key,
    cold_start_settings,
    measured_changes,
    with_cold_start_arm,
)
from searchrl.config.schema import FIELD_DOCS, FIELD_SECTIONS, SECTION_ORDER
from searchrl.config.sections import (
    ColdStartSettings,
    DataSettings,
    GeneralSettings,
    ModelSettings,
    ProtocolSettings,
    RetrievalSettings,
)
from searchrl.config.service import ServiceConfig
from searchrl.config.web_search import WebSearchConfig

__all__ = [
    "BOOKKEEPING_SETTINGS",
    "CHOICES",
    "COMPUTE_ONLY_SETTINGS",
    "FIELD_DOCS",
    "FIELD_SECTIONS",
    "NOTEBOOKS",
    "RESERVED_YAML_KEYS",
    "SECTION_ORDER",
    "AblationSettings",
    "BenchmarkSettings",
    "ColdStartSettings",
    "ConfigError",
    "DataSettings",
    "DifficultyConfig",
    "EvalSetSettings",
    "EvalSettings",
    "EvidenceConfig",
    "GeneralSettings",
    "HealthConfig",
    "KnowledgeConfig",
    "MemorizationConfig",
    "ModelSettings",
    "ProbeConfig",
    "ProtocolSettings",
    "RLSettings",
    "ReportSettings",
    "RetrievalSettings",
    "RolloutConfig",
    "RunConfig",
    "ServiceConfig",
    "WebSearchConfig",
    "arm_names",
    "arm_problems",
    "cold_start_key",
    "cold_start_settings",
    "drop_unread_defaults",
    "eval_decoding",
    "load_params_file",
    "measured_changes",
    "notebook_keys",
    "parse_scalar",
    "takes_key",
    "with_cold_start_arm",
    "yaml_loader",
]
