"""The synthetic world: fictional entities, Wikipedia-style passages about them, and multi-hop questions.

It is the project's embedded default data: nothing to download, every answer stated in the corpus, and names
invented from syllables so that no model can answer from memory. `make_world()` builds it.
"""

from searchrl.config.knowledge import KnowledgeConfig
from searchrl.data.synthetic.entities import ENTITY_KINDS, RELATIONS, Entity
from searchrl.data.synthetic.questions import QUESTION_TYPES
from searchrl.data.synthetic.world import SPLITS, World, make_world, world_of

__all__ = ["ENTITY_KINDS", "QUESTION_TYPES", "RELATIONS", "SPLITS", "Entity", "KnowledgeConfig", "World",
           "make_world", "world_of"]
