//! Malformed `--nodes` files through the binary, and 200 random ones: nodes or a clear
//! error naming the line, never a panic (the contract of `bad_input`).

use std::time::Instant;

use serde_json::Value;

use crate::bad_input::{assert_error, assert_no_panic};
use crate::common::{run_in as run, stderr, write};

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn malformed_nodes_files_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let deep = "[".repeat(100_000);
    let cases: [(&str, &[u8], &[&str]); 12] = [
        (
            "truncated.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\"\n",
            &["line 3", "EOF"],
        ),
        (
            "missing.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"b\"}\n",
            &["line 2", "node 2 has no `text`"],
        ),
        (
            "wrong_type.json",
            b"[{\"id\":\"a\",\"text\":\"x\"},\n {\"id\":2,\"text\":\"y\"}]",
            &[
                "line 2",
                "(index 1): node 2: `id` must be a string, got a number",
            ],
        ),
        (
            "pretty.json",
            b"{\n  \"id\": \"a\",\n  \"txt\": \"x\"\n}\n",
            &["line 4", "node 1 has no `text`", "\"txt\""],
        ),
        (
            "pretty_syntax.json",
            b"{\n  \"id\": \"a\",\n  \"text\": oops\n}\n",
            &["line 3", "expected value"],
        ),
        (
            "trailing_comma.json",
            b"[\n{\"id\":\"a\",\"text\":\"x\"},\n]\n",
            &["line 3", "trailing comma"],
        ),
        (
            "two_per_line.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"} {\"id\":\"b\",\"text\":\"y\"}\n",
            &["line 1", "trailing characters"],
        ),
        ("binary.jsonl", b"\xff\xfe\0garbage", &["line 1"]),
        ("deep.json", deep.as_bytes(), &["line 1"]),
        (
            "huge_number.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\",\"score\":1e999}\n",
            &["line 1", "out of range"],
        ),
        (
            "not_a_node.jsonl",
            b"\"a string is a node\"\n3\n",
            &[
                "line 2",
                "node 2: expected a string (the node's text) or an object",
            ],
        ),
        (
            "duplicate.jsonl",
            b"{\"id\":\"a\",\"text\":\"x\"}\n{\"node\":{\"id_\":\"a\",\"text\":\"y\"}}\n",
            &["line 2", "node 2 has the id \"a\", as node 1 does"],
        ),
    ];
    for (name, bytes, needles) in cases {
        write(dir.path(), name, bytes);
        let out = run(dir.path(), &["ask", "q", "--nodes", name]);
        let mut all = vec![name];
        all.extend_from_slice(needles);
        assert_error(&out, 1, &all, name);
    }
    for (name, bytes) in [
        ("empty.jsonl", &b""[..]),
        ("blank.jsonl", b"\n \n"),
        ("none.json", b"[]"),
    ] {
        write(dir.path(), name, bytes);
        let out = run(dir.path(), &["ask", "q", "--nodes", name]);
        assert_error(&out, 1, &[name, "has no nodes"], name);
    }
    let out = run(dir.path(), &["ask", "q", "--nodes", "absent.json"]);
    assert_error(&out, 2, &["cannot read --nodes `absent.json`"], "absent");
}

/// JSON-ish fragments for random `--nodes` files.
const NODE_PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\n",
    " ",
    "\"",
    "\"id\"",
    "\"text\"",
    "\"metadata\"",
    "\"score\"",
    "{\"id\":\"a\",\"text\":\"x\"}",
    "{\"id\":\"b\",\"text\":\"y {query_str}\",\"score\":0.5}",
    "{\"id\":\"c\",\"text\":\"z\",\"metadata\":{\"k\":[1,{\"n\":null}],\"t\":true},\"excluded_llm_metadata_keys\":[\"t\"]}",
    "{\"id\":1,\"text\":\"x\"}",
    "{\"id\":\"c\"}",
    "null",
    "true",
    "1e999",
    "-0",
    "\"\\ud800\"",
    "\"\\u00e9\"",
    "\\",
    "[[[[[[[[",
    "]]]]",
    "\u{feff}",
    "\r\n",
    "🚀",
    "\u{0}",
];

/// Random text for node fields: braces, escapes, unicode, control characters.
fn random_text(rng: &mut Rng) -> String {
    const PIECES: &[&str] = &[
        "word",
        " ",
        "{query_str}",
        "{context_str}",
        "{",
        "}",
        "\"",
        "\\",
        "\n",
        "é",
        "🚀",
        "\u{0}",
        "\u{7f}",
        "\u{feff}",
        "\u{301}",
        "中文",
        "\t",
    ];
    (0..rng.below(8))
        .map(|_| PIECES[rng.below(PIECES.len())])
        .collect()
}

/// A valid node as JSON, with random fields.
fn random_node(rng: &mut Rng) -> Value {
    let mut node = serde_json::json!({"id": random_text(rng), "text": random_text(rng)});
    if rng.below(2) == 0 {
        node["metadata"] = serde_json::json!({
            random_text(rng): random_text(rng),
            "n": rng.below(1000),
            "list": [true, null, 1.5, {"k": random_text(rng)}],
        });
        node["excluded_llm_metadata_keys"] = serde_json::json!(["n"]);
    }
    if rng.below(3) == 0 {
        node["score"] = serde_json::json!(rng.below(100) as f64 / 7.0);
    }
    node
}

/// Damages `bytes` once: cut, drop a byte, insert a fragment or flip a byte.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(4) {
        0 => bytes.truncate(at),
        1 => {
            bytes.remove(at);
        }
        2 => {
            let piece = NODE_PIECES[rng.below(NODE_PIECES.len())].as_bytes();
            bytes.splice(at..at, piece.iter().copied());
        }
        _ => bytes[at] = rng.next() as u8,
    }
}

/// A random `--nodes` file: raw bytes, JSON-ish fragments, or valid JSON lines or arrays
/// of random nodes, damaged half of the time.
fn random_nodes_file(rng: &mut Rng) -> Vec<u8> {
    match rng.below(6) {
        0 => (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
        1 => (0..rng.below(30))
            .flat_map(|_| NODE_PIECES[rng.below(NODE_PIECES.len())].bytes())
            .collect(),
        kind => {
            let nodes: Vec<Value> = (0..1 + rng.below(5)).map(|_| random_node(rng)).collect();
            let mut bytes = match kind {
                2 | 3 => nodes
                    .iter()
                    .map(|n| format!("{n}\n"))
                    .collect::<String>()
                    .into_bytes(),
                4 => serde_json::to_vec(&nodes).unwrap(),
                _ => serde_json::to_vec_pretty(&nodes[0]).unwrap(),
            };
            if rng.below(2) == 0 {
                mutate(rng, &mut bytes);
            }
            bytes
        }
    }
}

/// 200 random `--nodes` files through the binary: nodes or a clear error, never a panic.
/// (The 10,000-case run of the same rules on the library's deserializer is
/// `crates/synthkit/tests/fuzz_props.rs`.)
#[test]
fn random_nodes_files_never_panic() {
    const CASES: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x00c0_ffee);
    let (mut parsed, mut rejected) = (0usize, 0usize);
    let start = Instant::now();
    for case in 0..CASES {
        let bytes = random_nodes_file(&mut rng);
        let path = write(dir.path(), &format!("case{case}.jsonl"), &bytes);
        let mut args = vec!["ask", "q", "--nodes", path.to_str().unwrap(), "--mode"];
        args.push(["no_text", "compact", "context_only"][case % 3]);
        if case % 2 == 0 {
            args.push("--json");
        }
        let out = run(dir.path(), &args);
        let what = format!("case {case}: {:?}", String::from_utf8_lossy(&bytes));
        assert_no_panic(&out, &what);
        match out.status.code() {
            Some(0) => parsed += 1,
            Some(1) => {
                let line = assert_error(&out, 1, &[], &what);
                assert!(
                    line.contains(": line ") || line.contains("has no nodes"),
                    "{what}: {line}"
                );
                rejected += 1;
            }
            // Two nodes with one id: a usage error naming the id (issue 23).
            Some(2) => {
                let line = assert_error(&out, 2, &[], &what);
                assert!(line.contains("id"), "{what}: {line}");
                rejected += 1;
            }
            other => panic!("{what}: exit {other:?}\n{}", stderr(&out)),
        }
    }
    println!(
        "random --nodes files: {CASES} cases run through the binary ({parsed} parsed, {rejected} rejected) in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(parsed + rejected, CASES);
    assert!(
        parsed > 0 && rejected > 0,
        "{parsed} parsed, {rejected} rejected"
    );
}

/// A `--nodes` file (or standard input) over `--max-file-size` is refused before it is
/// read whole, naming the limit; under it the same nodes are read.
#[test]
fn nodes_over_the_file_size_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let line = "{\"id\":\"n\",\"text\":\"The mirror is cleaned every three months.\"}\n";
    let lines: String = (0..100)
        .map(|i| line.replace("\"n\"", &format!("\"n{i}\"")))
        .collect();
    write(dir.path(), "nodes.jsonl", &lines);
    let args = ["ask", "How often?", "--nodes", "nodes.jsonl", "--quiet"];
    let over = run(
        dir.path(),
        &[&args[..], &["--max-file-size", "1K"]].concat(),
    );
    assert_error(
        &over,
        2,
        &[
            "--nodes nodes.jsonl is larger than 1024 bytes",
            "--max-file-size",
        ],
        "a --nodes file over the limit",
    );
    let under = run(dir.path(), &args);
    assert!(under.status.success(), "{}", stderr(&under));

    let piped = crate::common::synthkit()
        .current_dir(dir.path())
        .args([
            "ask",
            "How often?",
            "--nodes",
            "-",
            "--quiet",
            "--max-file-size",
            "1K",
        ])
        .write_stdin(lines)
        .output()
        .unwrap();
    assert_error(
        &piped,
        2,
        &["larger than 1024 bytes"],
        "--nodes on standard input over the limit",
    );
}
