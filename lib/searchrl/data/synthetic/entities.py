"""The fictional entities of the synthetic world and the facts that link them.

Six kinds: countries, cities, people (in family trees four generations deep), films, books and organisations.
Each entity holds `facts`: a fact key mapped either to another entity's id (a relation such as a film's director)
or to a literal (a year, an occupation). Relations are what multi-hop questions walk along.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from searchrl.data.synthetic.names import gendered_given_names, invented_words

# fact key -> kind of the entity it points to, per kind of subject. Keys missing here hold literals.
RELATIONS: dict[str, dict[str, str]] = {
    "person": {"father": "person", "mother": "person", "spouse": "person", "birthplace": "city"},
    "film": {"director": "person", "filmed_in": "city"},
    "book": {"author": "person", "set_in": "city"},
    "organisation": {"founder": "person", "headquarters": "city"},
    "city": {"country": "country"},
    "country": {"capital": "city"},
}
# Years are what comparison questions compare.
YEAR_FACTS: dict[str, str] = {
    "person": "birth_year",
    "film": "release_year",
    "book": "publication_year",
    "organisation": "founded_year",
    "city": "founded_year",
}
ENTITY_KINDS = ("country", "city", "person", "film", "book", "organisation")

OCCUPATIONS = (
    "painter", "poet", "architect", "engineer", "botanist", "sculptor", "composer", "physician", "cartographer",
    "teacher", "merchant", "astronomer", "lawyer", "chemist", "photographer", "historian", "diplomat", "pianist",
)
DIRECTOR_OCCUPATION = "film director"
AUTHOR_OCCUPATION = "novelist"

# Organisation categories and how their names are built from an invented word.
ORGANISATION_NAMES = {
    "company": "{} Company",
    "university": "University of {}",
    "record label": "{} Records",
    "newspaper": "The {} Gazette",
    "bank": "{} Bank",
    "museum": "{} Museum",
}
FILM_TITLES = ("The {}", "{} Nights", "Return to {}", "The {} Affair", "Under the {} Sky", "{} Rising")
BOOK_TITLES = ("The {} Letters", "Songs of {}", "A House in {}", "The Last {}", "{} and the Sea", "The {} Garden")
COUNTRY_ENDINGS = ("ia", "ar", "esh", "ova", "istan", "enne")

GENERATIONS = 4  # enough for grandparents and in-laws, the 2WikiMultiHopQA "inference" relations
FIRST_BIRTH_YEAR = 1840
GENERATION_GAP = 30  # with births spread over 10 years, a parent is always at least 21 years older than a child
BIRTH_SPREAD = 10


@dataclass
class Entity:
    """One fictional thing. `fact_docs` maps a fact key to the id of the passage that states it."""

    id: str
    kind: str
    name: str
    facts: dict[str, str] = field(default_factory=dict)
    gender: str = ""  # "f" or "m" for people
    category: str = ""  # organisations: company, university, ...
    fact_docs: dict[str, str] = field(default_factory=dict)

    def target(self, key: str) -> str | None:
        """The id of the entity that relation `key` points to, or None when `key` is a literal or absent."""
        return self.facts.get(key) if key in RELATIONS.get(self.kind, {}) else None


def kind_counts(n_entities: int) -> dict[str, int]:
    """How many entities of each kind a world of `n_entities` holds (people are half of it)."""
    if n_entities < 30:
        raise ValueError(f"n_entities={n_entities} is too small for a world with families and works; use >= 30")
    counts = {
        "country": max(2, round(n_entities * 0.03)),
        "city": max(4, round(n_entities * 0.15)),
        "film": max(2, round(n_entities * 0.10)),
        "book": max(2, round(n_entities * 0.10)),
        "organisation": max(2, round(n_entities * 0.12)),
    }
    counts["person"] = n_entities - sum(counts.values())
    return counts


def build_entities(rng: np.random.Generator, n_entities: int, *, forbidden_words: set[str]) -> list[Entity]:
    """All entities of a world, with every fact filled in. Deterministic given the state of `rng`."""
    counts = kind_counts(n_entities)
    n_people = counts["person"]
    n_surnames = n_people // GENERATIONS + 1
    n_given = max(60, n_people // 4)
    pool = _NamePool(rng, forbidden_words)
    country_words = pool.take(counts["country"], lambda w: _trim(w) + COUNTRY_ENDINGS[len(w) % len(COUNTRY_ENDINGS)])
    city_words = pool.take(counts["city"])
    film_words = pool.take(counts["film"])
    book_words = pool.take(counts["book"])
    org_words = pool.take(counts["organisation"])
    surnames = pool.take(n_surnames)
    feminine, masculine = pool.take_given_names(n_given)

    countries = [Entity(f"country{i}", "country", w) for i, w in enumerate(country_words)]
    cities = [Entity(f"city{i}", "city", w) for i, w in enumerate(city_words)]
    _place_cities(rng, cities, countries)
    people = _family_trees(rng, n_people, surnames, feminine, masculine, cities)
    films, books, organisations = _works_and_organisations(rng, film_words, book_words, org_words, people, cities)
    return countries + cities + people + films + books + organisations


class _NamePool:
    """Hands out invented words so that no word serves two roles (a city is never also a surname)."""

    def __init__(self, rng: np.random.Generator, forbidden: set[str]):
        self.rng = rng
        self.taken = {w.lower() for w in forbidden}

    def take(self, n: int, derive=None) -> list[str]:
        """`n` new names, each `derive(word)` of a fresh invented word (the word itself without `derive`)."""
        out: list[str] = []
        while len(out) < n:
            for word in invented_words(self.rng, int((n - len(out)) * 1.2) + 8, forbidden=self.taken):
                name = derive(word) if derive else word
                if name.lower() in self.taken or word.lower() in self.taken:
                    continue
                self.taken.update({name.lower(), word.lower()})
                out.append(name)
                if len(out) == n:
                    break
        return out

    def take_given_names(self, n: int) -> tuple[list[str], list[str]]:
        """About n/2 feminine and n/2 masculine given names, built from short stems."""
        stems = invented_words(self.rng, n, forbidden=self.taken, min_len=3, max_len=6)
        feminine, masculine = gendered_given_names(stems, self.rng)
        feminine = [w for w in feminine if w.lower() not in self.taken]
        masculine = [w for w in masculine if w.lower() not in self.taken]
        self.taken.update(w.lower() for w in feminine + masculine)
        return feminine, masculine


def _trim(word: str) -> str:
    trimmed = word.rstrip("aeiouy")
    return trimmed if len(trimmed) >= 3 else word


def _place_cities(rng: np.random.Generator, cities: list[Entity], countries: list[Entity]) -> None:
    """Give every city a country and a founding year; every country gets its first city as capital."""
    n_c = len(countries)
    # The first cities go round-robin so that every country has at least one (its capital).
    country_of = np.concatenate([np.arange(n_c), rng.integers(0, n_c, max(0, len(cities) - n_c))])[: len(cities)]
    founded = rng.integers(1050, 1751, len(cities))
    for city, c, year in zip(cities, country_of.tolist(), founded.tolist()):
        city.facts = {"country": countries[c].id, "founded_year": str(year)}
    for i, country in enumerate(countries):
        country.facts = {"capital": cities[i].id}


def _family_trees(
    rng: np.random.Generator,
    n_people: int,
    surnames: list[str],
    feminine: list[str],
    masculine: list[str],
    cities: list[Entity],
) -> list[Entity]:
    """People in `GENERATIONS` generations: parents from the generation before, spouses within a generation.

    Children take their father's surname, as in most naming traditions, so families share a surname.
    """
    sizes = [n_people // GENERATIONS + (1 if g < n_people % GENERATIONS else 0) for g in range(GENERATIONS)]
    genders = np.where(rng.random(n_people) < 0.5, "f", "m").tolist()
    birthplaces = rng.integers(0, len(cities), n_people).tolist()
    offsets = rng.integers(0, BIRTH_SPREAD, n_people).tolist()
    used_names: set[str] = set()
    people: list[Entity] = []
    previous: list[Entity] = []
    next_surname = 0
    for g, size in enumerate(sizes):
        couples = _couples(rng, previous)
        parent_picks = rng.integers(0, max(1, len(couples)), size).tolist()
        current: list[Entity] = []
        for _ in range(size):
            i = len(people)
            gender = genders[i]
            if couples:
                father, mother = couples[parent_picks[len(current)]]
                surname = father.name.split(" ", 1)[1]
            else:
                father = mother = None
                surname = surnames[next_surname % len(surnames)]
                next_surname += 1
            name = _unique_person_name(rng, feminine if gender == "f" else masculine, surname, used_names)
            person = Entity(f"person{i}", "person", name, gender=gender)
            person.facts = {
                "birth_year": str(FIRST_BIRTH_YEAR + GENERATION_GAP * g + offsets[i]),
                "birthplace": cities[birthplaces[i]].id,
            }
            if father is not None:
                person.facts["father"] = father.id
                person.facts["mother"] = mother.id
            people.append(person)
            current.append(person)
        previous = current
    _couples(rng, previous)  # the youngest generation marries too, so everyone can have in-laws
    return people


def _couples(rng: np.random.Generator, generation: list[Entity]) -> list[tuple[Entity, Entity]]:
    """Marry most men and women of one generation to each other; records the spouse facts."""
    men = [p for p in generation if p.gender == "m"]
    women = [p for p in generation if p.gender == "f"]
    order_m = rng.permutation(len(men)).tolist()
    order_w = rng.permutation(len(women)).tolist()
    n = int(min(len(men), len(women)) * 0.85) or min(len(men), len(women))
    couples = [(men[a], women[b]) for a, b in zip(order_m[:n], order_w[:n])]
    for husband, wife in couples:
        husband.facts["spouse"] = wife.id
        wife.facts["spouse"] = husband.id
    return couples


def _unique_person_name(rng: np.random.Generator, given: list[str], surname: str, used: set[str]) -> str:
    """A given name + surname not used before (siblings and cousins never share a full name)."""
    for _ in range(50):
        name = f"{given[int(rng.integers(0, len(given)))]} {surname}"
        if name not in used:
            used.add(name)
            return name
    # A huge family exhausted the random tries: a middle initial tells its members apart. ("Ana K. Dros" does not
    # contain "Ana Dros", so neither name can be mistaken for a mention of the other.)
    for middle in "ABDEFGHKLMNPRSTV":
        for first in given:
            name = f"{first} {middle}. {surname}"
            if name not in used:
                used.add(name)
                return name
    raise RuntimeError(f"no free given name left for surname {surname!r}; increase the given-name pool")


def _works_and_organisations(
    rng: np.random.Generator,
    film_words: list[str],
    book_words: list[str],
    org_words: list[str],
    people: list[Entity],
    cities: list[Entity],
) -> tuple[list[Entity], list[Entity], list[Entity]]:
    """Films (with directors), books (with authors) and organisations (with founders).

    Directors and authors are disjoint groups of people whose occupation says so; a film appears 25-60 years
    after its director's birth, a book 22-65 years after its author's, an organisation 22-55 years after its
    founder's.
    """
    order = rng.permutation(len(people)).tolist()
    n_makers = max(1, len(people) // 6)
    # Cinema needs a film industry: directors come from the generations born after the first.
    film_era = [people[i] for i in order if int(people[i].facts["birth_year"]) >= FIRST_BIRTH_YEAR + GENERATION_GAP]
    directors = film_era[:n_makers]
    director_ids = {p.id for p in directors}
    order = [i for i in order if people[i].id not in director_ids]  # authors are drawn from everyone else
    authors = [people[i] for i in order[:n_makers]] or directors
    occupations = rng.integers(0, len(OCCUPATIONS), len(people)).tolist()
    for person, occ in zip(people, occupations):
        person.facts["occupation"] = OCCUPATIONS[occ]
    for person in directors:
        person.facts["occupation"] = DIRECTOR_OCCUPATION
    for person in authors:
        person.facts["occupation"] = AUTHOR_OCCUPATION

    def made(words, kind, titles, makers, maker_key, place_key, year_key, lag):
        pick = rng.integers(0, len(makers), len(words)).tolist()
        fmt = rng.integers(0, len(titles), len(words)).tolist()
        place = rng.integers(0, len(cities), len(words)).tolist()
        delay = rng.integers(lag[0], lag[1] + 1, len(words)).tolist()
        out = []
        for i, word in enumerate(words):
            maker = makers[pick[i]]
            entity = Entity(f"{kind}{i}", kind, titles[fmt[i]].format(word))
            entity.facts = {
                maker_key: maker.id,
                place_key: cities[place[i]].id,
                year_key: str(int(maker.facts["birth_year"]) + delay[i]),
            }
            out.append(entity)
        return out

    films = made(film_words, "film", FILM_TITLES, directors, "director", "filmed_in", "release_year", (25, 60))
    books = made(book_words, "book", BOOK_TITLES, authors, "author", "set_in", "publication_year", (22, 65))
    categories = list(ORGANISATION_NAMES)
    cat = rng.integers(0, len(categories), len(org_words)).tolist()
    organisations = made(
        org_words, "organisation", ("{}",), people, "founder", "headquarters", "founded_year", (22, 55)
    )
    for org, c in zip(organisations, cat):
        org.category = categories[c]
        org.name = ORGANISATION_NAMES[org.category].format(org.name)
    return films, books, organisations
