"""Small generated bAbI v1.2 files in the shapes of every folder of the release (tests only).

The official folders (``en``, ``hn``, ``shuffled`` and their ``-10k`` versions) share one line
format, ``ID text`` / ``ID question<TAB>answer<TAB>supporting ids``, and differ in what fills it:

* ``hn``: Hindi; answers of several words (``rasoi ghar``, kitchen) in tasks 1-4, 11-14 and 20.
  :func:`where_is` writes it in Devanagari (``lang="deva"``) or in Latin letters (``"roman"``).
* tasks 8 and 19: comma-separated list answers (``apple,football``, ``nothing``; ``n,w``):
  :func:`carrying` and :func:`path_finding`.
* ``shuffled``: the same tasks with the letters permuted by one fixed substitution, so words are
  unreadable but consistent: :func:`shuffle_letters`.

Every generator is deterministic in its ``seed`` and returns the file's text (LF line ends;
:func:`crlf` converts). Nothing here is copied from the release; the sentences are made up in its
format.
"""
import random
import string
from typing import Dict, List, Tuple

# (people, places, statement template, question template) per language. Places with spaces are
# the multi-word answers of the Hindi folders.
LANGS: Dict[str, Tuple[List[str], List[str], str, str]] = {
    "en": (["Mary", "John", "Sandra", "Daniel"],
           ["kitchen", "bedroom", "bathroom", "garden", "office", "hallway"],
           "{p} went to the {x}.", "Where is {p}?"),
    "roman": (["Sita", "Ram", "Mohan", "Gita"],
              ["rasoi ghar", "sone ka kamra", "snan ghar", "bagicha", "daftar", "galiyara"],
              "{p} {x} mein gaya.", "{p} kahan hai?"),
    "deva": (["सीता", "राम", "मोहन", "गीता"],
             ["रसोई घर", "सोने का कमरा", "स्नान घर", "बग़ीचा", "दफ़्तर", "गलियारा"],
             "{p} {x} में गया।", "{p} कहाँ है?"),
}


def where_is(n_questions: int, seed: int = 0, lang: str = "deva") -> str:
    """Task-1 shape: stories of 5 × (two moves, one question); the answer is where the asked
    person moved last (its supporting fact)."""
    people, places, say, ask = LANGS[lang]
    rng = random.Random(seed)
    lines: List[str] = []
    lid, last = 0, {}
    for q in range(n_questions):
        if q % 5 == 0:
            lid, last = 0, {}
        for _ in range(2):
            p, x = rng.choice(people), rng.choice(places)
            lid += 1
            lines.append(f"{lid} " + say.format(p=p, x=x))
            last[p] = (lid, x)
        p = rng.choice(sorted(last))
        lid += 1
        lines.append(f"{lid} " + ask.format(p=p) + f"\t{last[p][1]}\t{last[p][0]}")
    return "\n".join(lines) + "\n"


def carrying(n_questions: int, seed: int = 0, lang: str = "en") -> str:
    """Task-8 shape: people pick up and drop objects; "What is X carrying?" is answered by the
    comma-joined list of what X holds, or ``nothing`` (``kuch nahi`` in Hindi), supported by the
    pick-up lines."""
    if lang == "en":
        people, objs = ["Mary", "John"], ["apple", "football", "milk"]
        take, drop = "{p} picked up the {o}.", "{p} dropped the {o}."
        ask, none = "What is {p} carrying?", "nothing"
    else:
        people, objs = ["Sita", "Ram"], ["seb", "football", "doodh ki botal"]
        take, drop = "{p} ne {o} uthaya.", "{p} ne {o} gira diya."
        ask, none = "{p} kya le ja raha hai?", "kuch nahi"
    rng = random.Random(seed)
    lines: List[str] = []
    lid = 0
    held: Dict[str, Dict[str, int]] = {}       # person -> object -> id of its pick-up line
    for q in range(n_questions):
        if q % 4 == 0:
            lid, held = 0, {p: {} for p in people}
        for _ in range(2):
            p = rng.choice(people)
            free = [o for o in objs if not any(o in h for h in held.values())]
            if not free and not held[p]:
                p = next(x for x in people if held[x])
            lid += 1
            if held[p] and (not free or rng.random() < 0.3):
                o = rng.choice(sorted(held[p]))
                del held[p][o]
                lines.append(f"{lid} " + drop.format(p=p, o=o))
            else:
                o = rng.choice(free)
                held[p][o] = lid
                lines.append(f"{lid} " + take.format(p=p, o=o))
        p = rng.choice(people)
        lid += 1
        answer = ",".join(held[p]) or none
        lines.append(f"{lid} " + ask.format(p=p) + f"\t{answer}\t"
                     + " ".join(str(i) for i in held[p].values()))
    return "\n".join(lines) + "\n"


def path_finding(n_questions: int, seed: int = 0) -> str:
    """Task-19 shape: two relations between three places, the answer the two-step path
    (``n,w``), supported by both facts."""
    places = ["kitchen", "garden", "office", "hallway", "bedroom"]
    dirs = ["north", "south", "east", "west"]
    rng = random.Random(seed)
    lines = []
    for _ in range(n_questions):
        a, b, c = rng.sample(places, 3)
        d1, d2 = rng.choice(dirs), rng.choice(dirs)
        # "b is d1 of a": from a to b is d1's letter; "c is d2 of b": from b to c is d2's letter
        lines += [f"1 The {b} is {d1} of the {a}.", f"2 The {c} is {d2} of the {b}.",
                  f"3 How do you go from the {a} to the {c}?\t{d1[0]},{d2[0]}\t1 2"]
    return "\n".join(lines) + "\n"


def letter_cipher(seed: int = 0) -> Dict[str, str]:
    """A fixed random permutation of the Latin letters (upper case follows lower case)."""
    src = list(string.ascii_lowercase)
    dst = src[:]
    random.Random(seed).shuffle(dst)
    table = dict(zip(src, dst))
    table.update({k.upper(): v.upper() for k, v in table.items()})
    return table


def shuffle_letters(text: str, seed: int = 0) -> str:
    """The ``shuffled`` folders' transformation: every letter replaced by its image under
    :func:`letter_cipher`; IDs, tabs, punctuation and spacing kept."""
    return text.translate(str.maketrans(letter_cipher(seed)))


def crlf(text: str) -> str:
    """The same file with Windows (CRLF) line ends."""
    return text.replace("\n", "\r\n")


def write_task(folder, task: int, train: str, test: str, name: str = "generated",
               newline_crlf: bool = False) -> None:
    """Write qa{task}_{name}_train.txt / _test.txt into ``folder`` (a pathlib.Path), UTF-8."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in (("train", train), ("test", test)):
        data = crlf(text) if newline_crlf else text
        (folder / f"qa{task}_{name}_{split}.txt").write_bytes(data.encode("utf-8"))
