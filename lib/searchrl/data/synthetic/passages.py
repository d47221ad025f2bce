"""Wikipedia-style passages about the synthetic entities.

Each entity gets several passages titled with its name. Its facts are shared out among them, one short plain
sentence per fact ("Velora Kastin was born in Tamsek."), and filler sentences pad every passage to about 100 words.
Fillers never use the verbs that state facts (born, founded, directed, ...) and never claim a relation, so a
passage states no fact other than those recorded in `Entity.fact_docs`; they do name other places and people,
which gives the reader plausible distractors.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from tqdm.auto import tqdm

from searchrl.data.schema import Doc
from searchrl.data.synthetic.entities import Entity

# One or more phrasings per fact; {s} is the subject's name, {o} the object (a name or a literal).
FACT_SENTENCES: dict[str, dict[str, tuple[str, ...]]] = {
    "person": {
        "birth_year": ("{s} was born in {o}.", "{s} was born in the year {o}."),
        "birthplace": ("{s} was born in {o}.", "{s} was born in the city of {o}."),
        "occupation": ("{s} worked as {a} {o}.", "By profession, {s} was {a} {o}."),
        "father": ("The father of {s} was {o}.", "{o} was the father of {s}."),
        "mother": ("The mother of {s} was {o}.", "{o} was the mother of {s}."),
        "spouse": ("{s} was married to {o}.",),
    },
    "film": {
        "director": ("{s} was directed by {o}.", "{s} is a film directed by {o}."),
        "release_year": ("{s} was released in {o}.", "{s} is a film released in {o}."),
        "filmed_in": ("{s} was filmed in {o}.",),
    },
    "book": {
        "author": ("{s} was written by {o}.", "{s} is a novel written by {o}."),
        "publication_year": ("{s} was published in {o}.",),
        "set_in": ("{s} is set in {o}.", "The story of {s} is set in {o}."),
    },
    "organisation": {
        "founder": ("{s} was founded by {o}.",),
        "founded_year": ("{s} was founded in {o}.", "{s} was founded in the year {o}."),
        "headquarters": ("{s} is headquartered in {o}.", "{s} has its headquarters in {o}."),
    },
    "city": {
        "country": ("{s} is a city in {o}.", "{s} is located in {o}."),
        "founded_year": ("{s} was founded in {o}.",),
    },
    "country": {
        "capital": ("The capital of {s} is {o}.", "{o} is the capital of {s}."),
    },
}

# Slots: {s} the entity's name, {P} its pronoun, {place}/{other}/{land} other places, people and countries,
# and the word lists below.
FILLERS: dict[str, tuple[str, ...]] = {
    "person": (
        "{P} was known for a {adj} and {adj2} manner.",
        "Friends described {s} as {adj} and {adj2}.",
        "{s} spent several years in {place}.",
        "{P} kept a large collection of {collection}.",
        "{P} often wrote about {topic}.",
        "Letters from {s} to {other} survive in a private archive.",
        "{s} travelled widely and spoke several languages.",
        "A portrait of {s} hangs in a museum in {place}.",
        "{P} enjoyed long walks along the {landform}.",
        "{P} was a close friend of {other}.",
        "Later writers praised {s} for {adj} judgement.",
        "{s} is remembered for {adj} work on {topic}.",
        "Few records describe the early life of {s}.",
        "{P} disliked crowds and preferred {adj} evenings at home.",
        "In {place}, the name of {s} is still familiar.",
        "{P} studied with a {adj} teacher for many years.",
        "Visitors to {place} can see a small memorial to {s}.",
    ),
    "film": (
        "The film is noted for its {style} score.",
        "Critics praised the {style} performances in {s}.",
        "{s} runs for about {minutes} minutes.",
        "The story follows a {role} who returns to {place}.",
        "{s} was later shown at a festival in {place}.",
        "The cast included {other}.",
        "Its {style} photography drew wide attention.",
        "Audiences found the ending of {s} {style}.",
        "The film has a {style} and {style2} tone.",
        "{s} was restored for a new audience decades later.",
        "A sequel to {s} was planned but never made.",
        "The music for the film uses the {instrument} throughout.",
        "Several scenes of {s} take place at night.",
    ),
    "book": (
        "The novel is told in {style} prose.",
        "{s} follows a {role} who leaves {place}.",
        "Readers admired the {style} characters of {s}.",
        "The book runs to about {pages} pages.",
        "{s} was translated into several languages.",
        "Critics called the book {style} and {style2}.",
        "The novel contains long passages about {topic}.",
        "A stage version of {s} opened in {place}.",
        "Its final chapter is often quoted.",
        "{s} appeared in a {style} edition with drawings.",
        "Some readers found the plot of {s} {style}.",
    ),
    "organisation": (
        "{s} employs several hundred people.",
        "{s} is known for its {style} approach to {topic}.",
        "The organisation opened a branch in {place}.",
        "Its main building has a {style} facade.",
        "{s} works closely with partners in {place}.",
        "The staff of {s} publish a yearly report on {topic}.",
        "{s} has a {repute} reputation among its peers.",
        "Its archives hold papers on {topic}.",
        "{s} sponsors a yearly prize for young people.",
        "{other} once gave a speech at {s}.",
    ),
    "city": (
        "{s} lies beside a {scenic} river.",
        "The old quarter of {s} has narrow streets.",
        "{s} is known for its {scenic} markets.",
        "Many visitors come to {s} for its {feature}.",
        "The economy of {s} rests on {industry}.",
        "{s} hosts a large festival every {season}.",
        "A railway links {s} with {place}.",
        "The climate of {s} is {weather} in {season}.",
        "{s} has a population of about {population} people.",
        "The main square of {s} has a {style} fountain.",
        "Most houses in {s} are built of {material}.",
        "The streets of {s} grow busy on market days.",
        "Local cooks in {s} are proud of their {food}.",
        "A ferry once carried travellers from {s} to {place}.",
        "The city museum of {s} displays {collection}.",
    ),
    "country": (
        "{s} has a {scenic} coastline.",
        "The main exports of {s} are {industry} and {industry2}.",
        "{s} is divided into several provinces.",
        "The national flag of {s} shows a {colour} {symbol}.",
        "{s} shares a long border with {land}.",
        "The people of {s} celebrate a long holiday in {season}.",
        "{s} is famous for its {feature}.",
        "Travellers describe the hills of {s} as {scenic}.",
        "Much of {s} is covered by {landscape}.",
        "The cooking of {s} is known for its {food}.",
        "Roads in the north of {s} are often closed in winter.",
        "A railway crosses {s} from east to west.",
        "Many families in {s} earn a living from {industry}.",
        "The national museum of {s} displays {collection}.",
        "Children in {s} learn the old songs of the region at school.",
    ),
}

WORD_LISTS: dict[str, tuple[str, ...]] = {
    "adj": (  # character, for people
        "calm", "careful", "bold", "quiet", "gentle", "patient", "restless", "generous", "strict", "warm", "curious",
        "modest", "lively", "stern", "graceful", "sharp", "steady", "playful", "serious", "cheerful", "shy", "witty",
    ),
    "style": (  # works, buildings and the like
        "striking", "plain", "unusual", "elegant", "bold", "gentle", "sombre", "bright", "careful", "lively",
        "quiet", "grand", "simple", "strange", "memorable",
    ),
    "repute": ("good", "solid", "mixed", "strong", "growing", "modest", "long"),
    "scenic": ("wide", "green", "rocky", "quiet", "busy", "famous", "gentle", "steep", "lovely", "sunny", "long"),
    "weather": ("mild", "cold", "wet", "dry", "windy", "warm", "hot"),
    "collection": ("old maps", "glass bottles", "rare stamps", "pressed flowers", "clocks", "coins", "sea shells"),
    "topic": (
        "rivers", "old maps", "the weather", "birds", "trade routes", "music", "glassmaking", "gardens", "bridges",
        "folk songs", "mountains", "shipbuilding", "local history", "farming", "the night sky",
    ),
    "landform": ("coast", "river", "hills", "lake shore", "old canal", "valley"),
    "role": ("young sailor", "retired teacher", "travelling musician", "lonely clerk", "fisherman", "doctor"),
    "instrument": ("violin", "piano", "cello", "flute", "harp", "accordion"),
    "feature": ("old bridges", "hot springs", "painted houses", "harbour", "gardens", "mountain views"),
    "industry": ("timber", "wool", "fishing", "copper", "wine", "grain", "textiles", "salt"),
    "material": ("red brick", "grey stone", "timber", "white stone", "clay"),
    "food": ("fish stews", "sweet breads", "smoked cheese", "spiced soups", "honey cakes"),
    "landscape": ("forest", "open grassland", "low hills", "marshes", "farmland"),
    "season": ("spring", "summer", "autumn", "winter"),
    "colour": ("red", "blue", "green", "white", "golden", "black"),
    "symbol": ("star", "bird", "tree", "lion", "wheel", "crown"),
}


def template_vocabulary() -> set[str]:
    """Every English word the templates can write; invented names must avoid them to stay unambiguous."""
    texts = [t for by_key in FACT_SENTENCES.values() for ts in by_key.values() for t in ts]
    texts += [t for ts in FILLERS.values() for t in ts] + [w for ws in WORD_LISTS.values() for w in ws]
    return {w.lower() for t in texts for w in re.findall(r"[A-Za-z]+", t)}


class _Template:
    """A filler template parsed once: its slots, and whether it needs an article fix or a capital."""

    __slots__ = ("fix_article", "slots", "starts_with_slot", "text")

    def __init__(self, text: str):
        self.text = text
        self.slots = tuple(dict.fromkeys(re.findall(r"{(\w+)}", text)))
        self.fix_article = bool(re.search(r"\b[Aa] {", text))
        self.starts_with_slot = text.startswith("{")


_COMPILED = {kind: [_Template(t) for t in templates] for kind, templates in FILLERS.items()}
_AN_BEFORE_VOWEL = re.compile(r"\b([Aa]) (?=[aeiou])")


def write_corpus(
    rng: random.Random,
    entities: list[Entity],
    passages_per_entity: int,
    words_per_passage: int,
    *,
    progress: bool = False,
) -> list[Doc]:
    """Passages for every entity, in entity order; fills each entity's `fact_docs`."""
    writer = _Writer(rng, entities, words_per_passage)
    corpus: list[Doc] = []
    for entity in tqdm(entities, desc="writing passages", disable=not progress, unit="entity"):
        corpus.extend(writer.passages(entity, passages_per_entity))
    return corpus


class _Writer:
    """Writes the passages of one entity at a time. Hot code: a million-passage world runs it a million times."""

    def __init__(self, rng: random.Random, entities: list[Entity], words: int):
        self.rng = rng
        self.random = rng.random  # bound once: picking by `int(random() * n)` is several times faster than choice
        self.by_id = {e.id: e for e in entities}
        self.pools = {
            "other": [e.name for e in entities if e.kind == "person"],
            "place": [e.name for e in entities if e.kind == "city"],
            "land": [e.name for e in entities if e.kind == "country"],
            **WORD_LISTS,
        }
        self.words = words

    def pick(self, options) -> str:
        return options[int(self.random() * len(options))]

    def passages(self, entity: Entity, n_passages: int) -> Iterator[Doc]:
        rng = self.rng
        keys = [k for k in FACT_SENTENCES[entity.kind] if k in entity.facts]
        rng.shuffle(keys)
        pronoun = {"f": "She", "m": "He"}.get(entity.gender, "It")
        fillers = _COMPILED[entity.kind]
        spread = self.words // 7
        for j in range(n_passages):
            doc_id = f"{entity.id}.{j}"
            sentences = []
            for key in keys[j::n_passages]:
                sentences.append(self.fact_sentence(entity, key))
                entity.fact_docs[key] = doc_id
            count = sum(len(s.split()) for s in sentences) + len(entity.name.split())
            target = self.words + rng.randint(-spread, spread)
            # Draw fillers without replacement so a passage never repeats a sentence.
            for template in rng.sample(fillers, len(fillers)):
                if count >= target:
                    break
                sentence = self.fill(template, entity.name, pronoun)
                sentences.append(sentence)
                count += sentence.count(" ") + 1
            rng.shuffle(sentences)
            yield Doc(id=doc_id, title=entity.name, text=" ".join(sentences))

    def fact_sentence(self, entity: Entity, key: str) -> str:
        value = entity.facts[key]
        obj = self.by_id[value].name if entity.target(key) else value
        template = self.pick(FACT_SENTENCES[entity.kind][key])
        article = "an" if obj[:1].lower() in "aeiou" else "a"
        return _capitalise(template.format(s=entity.name, o=obj, a=article))

    def fill(self, template: _Template, name: str, pronoun: str) -> str:
        slots: dict[str, str] = {"s": name, "P": pronoun}
        for slot in template.slots:  # only the slots a template uses are drawn
            if slot in slots:
                continue
            if slot in ("place", "other", "land"):
                slots[slot] = self.other(self.pools[slot], name)
            elif slot.endswith("2"):  # a second word from the same list, different from the first
                slots[slot] = self.other(WORD_LISTS[slot[:-1]], slots.get(slot[:-1], ""))
            elif slot == "minutes":
                slots[slot] = str(80 + int(self.random() * 71))
            elif slot == "pages":
                slots[slot] = str(10 * (12 + int(self.random() * 49)))
            elif slot == "population":
                slots[slot] = f"{1000 * (5 + int(self.random() * 896)):,}"
            else:
                slots[slot] = self.pick(self.pools[slot])
        sentence = template.text.format(**slots)
        if template.fix_article:  # "a unusual facade" -> "an unusual facade"; capitalised names are left alone
            sentence = _AN_BEFORE_VOWEL.sub(r"\1n ", sentence)
        return _capitalise(sentence) if template.starts_with_slot else sentence

    def other(self, options, avoid: str) -> str:
        """A random option other than `avoid` (any option when there is no other)."""
        for _ in range(8):
            choice = self.pick(options)
            if choice != avoid:
                return choice
        return self.pick(options)


def _capitalise(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]
