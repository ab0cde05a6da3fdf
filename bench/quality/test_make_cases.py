#!/usr/bin/env python3
"""Tests of make_cases.py on synthetic text (no network, no real files):
python3 -m unittest bench/quality/test_make_cases.py"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_cases as mc  # noqa: E402

WORDS = ("startup founder money investor program language hacker essay city work idea "
         "company product user growth school paint design taste rich wealth").split()


def fake_essays(n: int = 12, sentences: int = 120, seed: int = 1) -> dict:
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        sents = []
        for _ in range(sentences):
            words = [rng.choice(WORDS) for _ in range(rng.randint(8, 20))]
            sents.append(" ".join(words).capitalize() + ".")
        out[f"essay{i:02d}"] = " ".join(sents)
    return out


class Chunking(unittest.TestCase):
    def test_chunks_stay_within_bounds_and_keep_every_word(self):
        units = [" ".join(["w"] * n) for n in (10, 40, 400, 3, 250, 90)]
        chunks = mc.chunk_units(units, 100, " ")
        self.assertTrue(all(mc.nwords(c) <= 125 for c in chunks))
        self.assertEqual(sum(mc.nwords(c) for c in chunks), sum(mc.nwords(u) for u in units))

    def test_glued_sentences_are_split(self):
        self.assertEqual(mc.sentences("It ran on the Web.A lot of people  had it."),
                         ["It ran on the Web.", "A lot of people had it."])


class Bm25(unittest.TestCase):
    def test_the_chunk_with_the_rare_words_ranks_first(self):
        texts = ["the cat sat on the mat"] * 5 + ["the lighthouse keeper of Varnholm island"]
        top = mc.BM25(texts).top("Who keeps the Varnholm lighthouse?", 3)
        self.assertEqual(top[0][0], 5)
        self.assertEqual(len(top), 1)  # chunks sharing no query word are not returned


class Answers(unittest.TestCase):
    def test_the_three_forms(self):
        self.assertTrue(mc.answer_matches("It is the Grey Wagtail.", ["grey wagtail"]))
        self.assertTrue(mc.answer_matches("Obed Marr and Tomas Quell", [["obed marr", "tomas quell"]]))
        self.assertFalse(mc.answer_matches("Obed Marr only", [["obed marr", "tomas quell"]]))
        self.assertTrue(mc.answer_matches("every 19 days", [{"regex": r"\b19\b"}]))
        self.assertFalse(mc.answer_matches("every 119 days", [{"regex": r"\b19\b"}]))


class Needles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = mc.needle_cases(fake_essays(), seed=42, k=8, chunk_words=250)
        cls.by_id = {c["id"]: c for c in cls.cases}

    def test_counts_and_unique_ids(self):
        n_single, n_multi = len(mc.SINGLE), len(mc.MULTI)
        self.assertEqual(len(self.cases), n_single * 4 + n_multi * 3)
        self.assertEqual(len(self.by_id), len(self.cases))

    def test_the_fact_sits_at_its_depth(self):
        essays = fake_essays()
        sents = {e: mc.sentences(t) for e, t in essays.items()}
        order = sorted(sents)
        for depth in (0.1, 0.5, 0.9):
            chunks = mc.build_haystack(sents, order, [(depth, "MARKER sentence.")], 250)
            at = [i for i, (_, text, _) in enumerate(chunks) if "MARKER" in text]
            self.assertEqual(len(at), 1)
            self.assertAlmostEqual(at[0] / len(chunks), depth, delta=0.03)

    def test_single_cases_retrieve_their_fact(self):
        for depth in (10, 50, 90):
            case = self.by_id[f"needle-single-varnholm-d{depth}"]
            self.assertEqual(len(case["_retrieval"]["evidence_all"]), 1)
            self.assertEqual(case["evidence"], case["_retrieval"]["evidence_all"])
            self.assertIn("retrieval-hit", case["tags"])

    def test_answerable_cases_hold_their_facts_and_absent_ones_do_not(self):
        for c in self.cases:
            text = " ".join(n["text"] for n in c["nodes"])
            self.assertTrue(set(c["evidence"]) <= {n["id"] for n in c["nodes"]})
            self.assertTrue(all(n["metadata"]["file_name"].endswith(".txt") for n in c["nodes"]))
            if c["id"].endswith("-absent"):
                self.assertFalse(c["answerable"])
                self.assertEqual(c["answers"], [])
                self.assertFalse(any(f in text for f in mc.FACTS.values()), c["id"])
            elif "single" in c["tags"]:
                self.assertTrue(mc.answer_matches(text, c["answers"]), c["id"])
        # The decoys are in every haystack, so an unanswerable case can retrieve one.
        absent = self.by_id["needle-single-varnholm-absent"]
        self.assertIn("Skarholm", " ".join(n["text"] for n in absent["nodes"]))

    def test_same_seed_same_cases(self):
        again = mc.needle_cases(fake_essays(), seed=42, k=8, chunk_words=250)
        self.assertEqual(json.dumps(again), json.dumps(self.cases))

    def test_the_subset_takes_every_stratum(self):
        sub = mc.subset(self.cases, 6, 42)
        self.assertEqual(len(sub), 6)
        self.assertEqual({mc.stratum(c) for c in sub},
                         {"needle-single", "needle-multi", "needle-unanswerable"})


class DocCasesFile(unittest.TestCase):
    def test_doc_cases_are_well_formed(self):
        with open(os.path.join(mc.HERE, "doc_cases.json"), encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        self.assertGreaterEqual(sum(c["answerable"] for c in cases), 40)
        self.assertGreaterEqual(sum(not c["answerable"] for c in cases), 8)
        self.assertEqual(len({c["id"] for c in cases}), len(cases))
        for c in cases:
            self.assertTrue(("crate" in c) != ("file" in c), c["id"])
            self.assertTrue(c["question"].endswith("?"), c["id"])
            for a in c["answers"]:
                if isinstance(a, dict):
                    re.compile(a["regex"])
                elif isinstance(a, list):
                    self.assertTrue(all(isinstance(x, str) for x in a), c["id"])
                else:
                    self.assertIsInstance(a, str)
            if c["answerable"]:
                self.assertTrue(c["answers"], c["id"])
                mc.evidence_regex(c["evidence"])
            else:
                self.assertEqual(c["answers"], [], c["id"])


if __name__ == "__main__":
    unittest.main()
