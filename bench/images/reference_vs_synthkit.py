#!/usr/bin/env python3
"""Multimodal synthesis: LlamaIndex's (the reference's) vs synthkit's, on one tiny-vision llama-server.

    python3 bench/images/reference_vs_synthkit.py [--windows 512,1024,2048] [--ctx 2048]

Starts ONE llama-server (`LLAMA_MODEL=tiny-vision scripts/llama-server.sh`, `-np 1`, context
--ctx; every image costs it 16 prompt tokens), builds a mixed node set (text nodes of a few
hundred words and PNG ImageNodes of several sizes), and for each declared window and mode runs

- the reference: `get_response_synthesizer(llm=OpenAILike(...), response_mode=MODE,
  multimodal=True)` in the venv given by --venv (llama-index-core 0.14.25), every HTTP
  exchange recorded through httpx event hooks (status, usage.prompt_tokens, image parts sent);
- synthkit: `synthkit ask --nodes FILE --images on --json --steps` (the binary from --synthkit),
  whose steps give the prompt tokens it counted before each call and the tokens the server
  charged.

Prints one markdown table per window. "over window" counts calls whose prompt plus output
reserve exceeded the declared window (a real server with that window refuses them); "errors"
counts failed requests and failed runs (the server refuses a prompt over --ctx).
Nothing is written into the repository; temporary files go to a temporary folder.
"""
import argparse
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
QUERY = "What do the sources say about the harbour and its lighthouse?"
WORDS = (
    "harbour lighthouse keeper storm winter ships cargo tide pier lantern fog bell town "
    "fishermen nets market morning evening coast cliff wind rain boat crew captain signal "
    "beam night rocks channel charts records ledger repair tower stairs glass lens oil"
).split()
IMAGE_SIZES = [(16, 16), (64, 64), (300, 200), (640, 480), (128, 512), (1024, 768)]


def png(w, h, seed):
    """A valid RGB PNG of w x h pixels (a deterministic pattern)."""
    row = lambda y: b"\0" + bytes(((x * 7 + y * 13 + seed * 31) & 0xFF) for x in range(w * 3))
    raw = b"".join(row(y) for y in range(h))

    def chunk(tag, data):
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def text(seed, words):
    out = []
    for i in range(words):
        out.append(WORDS[(i * 7 + seed * 11 + (i // 5) * 3) % len(WORDS)])
        if i % 12 == 11:
            out[-1] += "."
    return " ".join(out).capitalize() + "."


def make_nodes():
    """6 text nodes (200-450 words) and 6 image nodes, interleaved, in LlamaIndex's shape."""
    nodes = []
    for k, (w, h) in enumerate(IMAGE_SIZES):
        nodes.append({"id_": f"text-{k}", "text": text(k, 200 + 50 * k)})
        nodes.append(
            {
                "id_": f"image-{k}-{w}x{h}",
                "text": f"Figure {k}: a {w}x{h} photograph of the harbour.",
                "image": base64.b64encode(png(w, h, k)).decode(),
                "image_mimetype": "image/png",
            }
        )
    return nodes


# ---------------------------------------------------------------- the reference (in the venv)
def reference_child(spec):
    import httpx
    from llama_index.core import get_response_synthesizer
    from llama_index.core.schema import ImageNode, NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike

    nodes = []
    for n in json.load(open(spec["nodes"])):
        if "image" in n:
            node = ImageNode(id_=n["id_"], text=n["text"], image=n["image"], image_mimetype=n["image_mimetype"])
        else:
            node = TextNode(id_=n["id_"], text=n["text"])
        nodes.append(NodeWithScore(node=node, score=1.0))
    results = {}
    for mode in spec["modes"]:
        calls = []

        def on_request(req):
            images = 0
            try:
                body = json.loads(req.content)
                for m in body.get("messages", []):
                    if isinstance(m.get("content"), list):
                        images += sum(1 for p in m["content"] if p.get("type") == "image_url")
            except Exception:
                pass
            calls.append({"images": images})

        def on_response(resp):
            resp.read()
            rec = calls[-1] if calls else {}
            rec["status"] = resp.status_code
            try:
                rec["prompt_tokens"] = resp.json().get("usage", {}).get("prompt_tokens")
            except Exception:
                rec["prompt_tokens"] = None
            if resp.status_code >= 400:
                rec["error"] = resp.text[:300]

        client = httpx.Client(timeout=600, event_hooks={"request": [on_request], "response": [on_response]})
        llm = OpenAILike(
            model="tiny",
            api_base=spec["base_url"],
            api_key="none",
            is_chat_model=True,
            context_window=spec["window"],
            max_tokens=spec["num_output"],
            temperature=0,
            max_retries=0,
            http_client=client,
        )
        error = None
        try:
            synth = get_response_synthesizer(llm=llm, response_mode=mode, multimodal=True)
            synth.synthesize(QUERY, nodes)
        except Exception as e:  # the finding is the error itself
            error = f"{type(e).__name__}: {str(e)[:300]}"
        results[mode] = {"calls": calls, "error": error}
    json.dump(results, sys.stdout)


def run_reference(venv_python, nodes_file, base_url, window, num_output, modes):
    spec = {"nodes": nodes_file, "base_url": base_url, "window": window, "num_output": num_output, "modes": modes}
    p = subprocess.run(
        [venv_python, os.path.abspath(__file__), "--reference-child", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if p.returncode != 0:
        sys.exit(f"the reference failed to run:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout)


# ---------------------------------------------------------------- synthkit
def run_synthkit(binary, jsonl, base_url, window, num_output, mode):
    cmd = [
        binary, "ask", QUERY, "--nodes", jsonl, "--base-url", base_url, "--images", "on",
        "--context-window", str(window), "--num-output", str(num_output), "--mode", mode,
        "--temperature", "0", "--json", "--steps", "--max-calls", "1000", "--yes",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    out = {"rc": p.returncode, "steps": [], "error": None}
    try:
        out["steps"] = json.loads(p.stdout).get("steps", [])
    except Exception:
        pass
    if p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if l.strip() and "WARN" not in l and not l.startswith("warning:")]
        out["error"] = (lines[-1] if lines else f"exit {p.returncode}")[:300]
    return out


# ---------------------------------------------------------------- table
def row(mode, system, window, num_output, prompts, counted, errors, images_sent):
    done = [t for t in prompts if t is not None]
    over = sum(1 for t in done if t + num_output > window)
    counted_s = f"{sum(counted)}" if counted else "-"
    mx = max(done) if done else 0
    return (
        f"| {mode} | {system} | {len(prompts)} | {images_sent} | {sum(done)} | {counted_s} | "
        f"{over} | {errors} | {mx} + {num_output} / {window} |"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference-child", help=argparse.SUPPRESS)
    ap.add_argument("--windows", default="512,1024,2048")
    ap.add_argument("--modes", default="compact,refine,tree_summarize")
    ap.add_argument("--ctx", type=int, default=2048, help="the server's context (one slot)")
    ap.add_argument("--num-output", type=int, default=64)
    ap.add_argument("--port", type=int, default=18467)
    ap.add_argument("--venv", default=os.path.expanduser("~/.cache/synthkit-quality-venv/bin/python"))
    ap.add_argument("--synthkit", default=os.environ.get("SYNTHKIT_BIN") or shutil.which("synthkit") or "synthkit")
    args = ap.parse_args()
    if args.reference_child:
        return reference_child(json.loads(args.reference_child))

    modes = args.modes.split(",")
    windows = [int(w) for w in args.windows.split(",")]
    tmp = tempfile.mkdtemp(prefix="imgbench-")
    nodes = make_nodes()
    nodes_json = os.path.join(tmp, "nodes.json")
    nodes_jsonl = os.path.join(tmp, "nodes.jsonl")
    json.dump(nodes, open(nodes_json, "w"))
    with open(nodes_jsonl, "w") as f:
        for n in nodes:
            f.write(json.dumps(n) + "\n")

    env = dict(os.environ, LLAMA_MODEL="tiny-vision", LLAMA_SERVER_ARGS="-np 1", LLAMA_WATCH_PID=str(os.getpid()))
    started = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "llama-server.sh"), str(args.port), str(args.ctx)],
        env=env, capture_output=True, text=True, timeout=1800,
    )
    if started.returncode != 0:
        sys.exit(f"llama-server did not start:\n{started.stderr[-2000:]}")
    base_url, pid = started.stdout.split()[:2]
    try:
        print(f"server: tiny-vision llama-server, ctx {args.ctx}, 1 slot; {len(nodes)} nodes "
              f"({len(IMAGE_SIZES)} PNG images: {', '.join(f'{w}x{h}' for w, h in IMAGE_SIZES)}); "
              f"num_output {args.num_output}; LlamaIndex estimates each image at 2,125 tokens, "
              f"the server charges 16\n")
        for window in windows:
            ref = run_reference(args.venv, nodes_json, base_url, window, args.num_output, modes)
            print(f"### declared context window {window} (server context {args.ctx})\n")
            print("| mode | system | calls | images sent | prompt tokens (server) | counted before sending | "
                  "over window | errors | max prompt + output / window |")
            print("|---|---|---|---|---|---|---|---|---|")
            notes = []
            for mode in modes:
                r = ref[mode]
                errs = sum(1 for c in r["calls"] if c.get("status", 0) >= 400) + (1 if r["error"] else 0)
                print(row(mode, "LlamaIndex 0.14.25", window, args.num_output,
                          [c.get("prompt_tokens") for c in r["calls"]], [], errs,
                          sum(c["images"] for c in r["calls"])))
                if r["error"]:
                    notes.append(f"- LlamaIndex {mode}: {r['error']}")
                s = run_synthkit(args.synthkit, nodes_jsonl, base_url, window, args.num_output, mode)
                steps = s["steps"]
                print(row(mode, "synthkit", window, args.num_output,
                          [st.get("prompt_tokens") for st in steps],
                          [st.get("counted_prompt_tokens") or 0 for st in steps],
                          1 if s["error"] else 0,
                          # Images go only into calls that read nodes (a tree level above
                          # the first lists the nodes under its summaries but reads text).
                          sum(1 for st in steps if not st.get("input_calls")
                              for n in st.get("node_ids", []) if n.startswith("image-"))))
                if s["error"]:
                    notes.append(f"- synthkit {mode}: {s['error']}")
            print()
            for n in notes:
                print(n)
            if notes:
                print()
            sys.stdout.flush()
    finally:
        try:
            os.kill(int(pid), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
