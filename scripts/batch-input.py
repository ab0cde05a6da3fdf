#!/usr/bin/env python3
"""Writes the input of the `synthkit batch` figures (docs/batch.md, "Figures"): N
requests in JSON lines, each the bench query over 8 consecutive chunks of a bench corpus
(ids n00000, ...; the corpus wraps around), mode compact.

usage: scripts/batch-input.py CORPUS.json N OUT.jsonl
e.g.   scripts/batch-input.py ../shared/bench/corpus_n1000_s42.json 10000 /tmp/batch-in.jsonl
"""
import json
import sys

QUERY = "What does the text say about iterables and exceptions?"
NODES_PER_REQUEST = 8


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    corpus_path, n, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(corpus_path, encoding="utf-8") as f:
        chunks = json.load(f)
    with open(out_path, "w", encoding="utf-8") as out:
        for i in range(n):
            first = i * NODES_PER_REQUEST
            nodes = [
                {"id": f"n{(first + k) % len(chunks):05}", "text": chunks[(first + k) % len(chunks)]}
                for k in range(NODES_PER_REQUEST)
            ]
            request = {"id": f"r{i:05}", "query": QUERY, "mode": "compact", "nodes": nodes}
            out.write(json.dumps(request) + "\n")


if __name__ == "__main__":
    main()
