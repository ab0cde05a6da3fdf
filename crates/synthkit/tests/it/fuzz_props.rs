//! Fuzz-style properties on arbitrary input, 10,000 cases each (fixed, whatever
//! `PROPTEST_CASES` says):
//!
//! 1. the template formatter on arbitrary text full of braces and unicode: never panics,
//!    never substitutes inside values, leaves unknown `{...}` as written;
//! 2. the token text splitter on arbitrary *bytes* decoded lossily, with random sizes: never
//!    panics, every chunk within its size (but a lone oversized character), no text lost;
//! 3. node parsing (the library's `Node` deserializer, as `synthkit --nodes` uses it: a JSON
//!    array, or one node per line) on arbitrary bytes: never panics; either nodes or an
//!    error with a line number. The CLI's own `parse_nodes` lives in the binary; its
//!    binary-level run is in `crates/synthkit-cli/tests/bad_input.rs`.
//!
//! Each test prints how many cases it ran and how long it took (`--nocapture` to see).

use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use synthkit::Node;
use synthkit::prompt::template::format_one_pass;
use synthkit::prompt::{PromptTemplate, Role, TemplateKind};
use synthkit::text::{BpeTokenizer, SharedTokenizer, TokenTextSplitter};

use crate::common::chunks::check_chunks;

/// Cases per property.
const CASES: u32 = 10_000;

fn config() -> Config {
    Config {
        cases: CASES,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

/// Runs `test` on `CASES` inputs from `strategy`, prints the count and time, and fails
/// with proptest's minimal failing input if any case fails.
fn run<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(config());
    let cases = std::sync::atomic::AtomicU32::new(0);
    let start = Instant::now();
    let result = runner.run(&strategy, |v| {
        cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        test(v)
    });
    let ran = cases.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "{name}: {ran} cases run ({CASES} required to pass) in {:.2}s",
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    assert!(ran >= CASES, "{name}: only {ran} cases ran");
}

// ------------------------------------------------------------------ 1. templates

/// Sentinels standing for values; never generated in inputs (they are stripped).
const S1: char = '\u{E000}';
const S2: char = '\u{E001}';

fn strip_sentinels(s: String) -> String {
    s.replace([S1, S2], "")
}

/// A piece of template text or value: braces, placeholders (good and broken), unicode.
fn brace_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "\\PC{0,6}",
        2 => "[a-z_ .:>0-9]{0,5}",
        5 => prop::sample::select(vec![
            "{", "}", "{{", "}}", "{query_str}", "{context_str}", "{existing_answer}",
            "{context_msg}", "{x}", "{a.b}", "{a.}", "{.a}", "{1a}", "{}", "{ }", "{é}",
            "{x:>3}", "{\"k\": 1}", "{query_str", "query_str}", "{{query_str}}", "{{x}",
            "{query_str}}", "🚀", "é", "e\u{301}", "\u{301}", "\0", "\n", "\r\n", "\u{feff}",
            "中文", "{中}", "{x\u{301}}", "{_}", "{a_1.b_2}", "}{", "{\n}",
        ])
        .prop_map(String::from),
        1 => any::<String>(),
    ]
}

fn bracey() -> impl Strategy<Value = String> {
    prop::collection::vec(brace_piece(), 0..14).prop_map(|v| strip_sentinels(v.concat()))
}

fn var_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "query_str",
        "context_str",
        "existing_answer",
        "context_msg",
        "x",
        "a.b",
        "_",
        "nope",
    ])
}

#[derive(Debug, Clone)]
struct TemplateCase {
    head: String,
    tail: String,
    unknown_at_join: bool,
    names: (&'static str, &'static str),
    values: (String, String),
    kind: TemplateKind,
}

fn template_case() -> impl Strategy<Value = TemplateCase> {
    (
        bracey(),
        bracey(),
        any::<bool>(),
        (var_name(), var_name()).prop_filter("distinct names", |(a, b)| a != b),
        (bracey(), bracey()),
        prop::sample::select(vec![
            TemplateKind::Qa,
            TemplateKind::Refine,
            TemplateKind::Summary,
            TemplateKind::Simple,
            TemplateKind::Custom,
        ]),
    )
        .prop_map(
            |(head, tail, unknown_at_join, names, values, kind)| TemplateCase {
                head,
                tail,
                unknown_at_join,
                names,
                values,
                kind,
            },
        )
}

/// A name that is never supplied; inserted between the two halves of the template.
const UNKNOWN: &str = "{zz_unknown_var}";

fn check_template(c: TemplateCase) -> Result<(), TestCaseError> {
    let text = if c.unknown_at_join {
        format!("{}{UNKNOWN}{}", c.head, c.tail)
    } else {
        format!("{}{}", c.head, c.tail)
    };
    let (n1, n2) = c.names;
    let (v1, v2) = (c.values.0.as_str(), c.values.1.as_str());
    let t = PromptTemplate::completion(c.kind, text.clone());
    let chat = PromptTemplate::chat(
        c.kind,
        vec![(Role::System, c.head.clone()), (Role::User, text.clone())],
    )
    .unwrap();

    // Never panics: every read-only entry point.
    let names = t.variables();
    let _ = t.validate();
    let _ = chat.validate();
    let _ = t.has_variable(n1);
    for n in &names {
        let braced = format!("{{{n}}}");
        prop_assert!(text.contains(&braced), "variable {n} not in the text");
    }

    let render = |t: &PromptTemplate, vars: &[(&str, &str)]| -> String {
        t.render(vars).as_text().unwrap_or_default().to_string()
    };

    // Nothing supplied: the text comes back exactly (unknown `{...}` stays as written).
    prop_assert_eq!(render(&t, &[]), text.as_str());
    prop_assert_eq!(render(&t, &[("zz_other", v1)]), text.as_str());

    // Values are copied, never scanned: rendering with values equals rendering with
    // sentinels, then putting each value in its sentinel's place.
    let out = render(&t, &[(n1, v1), (n2, v2)]);
    let s1 = S1.to_string();
    let s2 = S2.to_string();
    let marked = render(&t, &[(n1, &s1), (n2, &s2)]);
    prop_assert_eq!(&out, &marked.replace(S1, v1).replace(S2, v2));
    // A value appears verbatim wherever its variable is.
    prop_assert_eq!(marked.contains(S1), names.contains(&n1));
    prop_assert_eq!(marked.contains(S2), names.contains(&n2));
    if names.contains(&n1) {
        prop_assert!(out.contains(v1), "value 1 not verbatim");
    }
    // The unknown placeholder survives any rendering.
    if c.unknown_at_join {
        prop_assert!(out.contains(UNKNOWN), "unknown placeholder lost");
    }

    // Partial values behave as call-time values; call-time values win.
    let partial = t.partial(n1, v1);
    prop_assert_eq!(render(&partial, &[(n2, v2)]), out.as_str());
    prop_assert_eq!(
        render(&partial, &[(n1, v2), (n2, v2)]),
        render(&t, &[(n1, v2), (n2, v2)])
    );

    // Empty rendering = every variable given "".
    let all_empty: Vec<(&str, &str)> = names.iter().map(|n| (*n, "")).collect();
    let empty = t.render_empty(&[]);
    prop_assert_eq!(empty.as_text().unwrap_or_default(), render(&t, &all_empty));

    // Chat templates render each message the same way.
    let chat_out = chat.render(&[(n1, v1), (n2, v2)]).to_text();
    prop_assert!(chat_out.contains(&out), "chat rendering differs");

    // The raw formatter with a lookup that always answers (braces in the answer).
    let always = |_: &str| -> Option<&str> { Some("{query_str}") };
    let _ = format_one_pass(&text, &always);
    let never = |_: &str| -> Option<&str> { None };
    prop_assert_eq!(format_one_pass(&text, &never), text.as_str());
    Ok(())
}

#[test]
fn template_formatter_on_arbitrary_text() {
    run("template formatter", template_case(), check_template);
}

// ------------------------------------------------------------------ 2. the splitter

/// Bytes: uniform, text-like with stray high bytes, valid UTF-8 with cut points, long runs.
fn arbitrary_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..400),
        3 => prop::collection::vec(
            prop_oneof![
                8 => b'a'..=b'z',
                3 => Just(b' '),
                1 => Just(b'\n'),
                1 => Just(b'\t'),
                1 => 0x80u8..=0xFF,
                1 => any::<u8>(),
            ],
            0..700,
        ),
        2 => ("\\PC{0,150}", prop::collection::vec(any::<prop::sample::Index>(), 0..4)).prop_map(
            |(s, cuts)| {
                // Valid UTF-8 with a few bytes dropped: broken sequences mid-text.
                let mut b = s.into_bytes();
                for i in cuts {
                    if !b.is_empty() {
                        b.remove(i.index(b.len()));
                    }
                }
                b
            }
        ),
        1 => (any::<u8>(), 0..3000usize).prop_map(|(b, n)| vec![b; n]),
    ]
}

fn tokenizers() -> [SharedTokenizer; 2] {
    [
        BpeTokenizer::cl100k_base().shared(),
        BpeTokenizer::o200k_base().shared(),
    ]
}

#[test]
fn splitter_on_arbitrary_bytes() {
    let toks = tokenizers();
    let strategy = (
        arbitrary_bytes(),
        prop_oneof![3 => 1usize..40, 2 => 40usize..400, 1 => 0usize..3],
        0usize..50,
        any::<bool>(),
    );
    run("splitter", strategy, |(bytes, size, overlap, o200k)| {
        let text = String::from_utf8_lossy(&bytes);
        let tok = &toks[usize::from(o200k)];
        let splitter = match TokenTextSplitter::new(size, overlap, tok.clone()) {
            Ok(s) => s,
            Err(e) => {
                // Bad settings are an error, never a panic.
                prop_assert!(
                    size == 0 || overlap > size,
                    "rejected {size}/{overlap}: {e}"
                );
                return Ok(());
            }
        };
        let chunks = splitter.split_chunks(&text);
        let sizes = vec![size; chunks.len()];
        let checked = check_chunks(&text, &chunks, &sizes, overlap == 0, tok.as_ref());
        prop_assert_eq!(checked, Ok(()));
        let texts = splitter.split_text(&text);
        if text.is_empty() {
            prop_assert_eq!(texts, vec![String::new()]);
        } else {
            let expected: Vec<&str> = chunks.iter().map(|c| c.text(&text)).collect();
            prop_assert_eq!(texts, expected);
        }
        Ok(())
    });
}

// ------------------------------------------------------------------ 3. node parsing

/// JSON-ish bytes: node fragments, broken syntax, deep nesting, stray bytes and newlines.
fn nodeish_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        6 => prop::sample::select(vec![
            "{", "}", "[", "]", ",", ":", "\n", " ", "\"", "\"id\"", "\"text\"", "\"metadata\"",
            "\"score\"", "\"excluded_llm_metadata_keys\"", "{\"id\":\"a\",\"text\":\"x\"}",
            "{\"id\":\"b\",\"text\":\"y {query_str}\",\"score\":0.5}",
            "{\"id\":1,\"text\":\"x\"}", "{\"id\":\"c\"}", "{\"text\":\"t\"}",
            "\"metadata\":{\"k\":[1,{\"z\":null}]}", "null", "true", "1e999", "-0", "NaN",
            "\"\\ud800\"", "\"\\u00e9\"", "\\", "[[[[[[[[[[[[[[[[", "]]]]]]]]", "\u{feff}",
            "\"score\":\"high\"", "\"excluded_llm_metadata_keys\":[\"k\"]", "\r\n",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        2 => "\\PC{0,8}".prop_map(String::into_bytes),
        2 => prop::collection::vec(any::<u8>(), 0..8),
        1 => (1usize..400).prop_map(|n| "[".repeat(n).into_bytes()),
    ];
    prop_oneof![
        4 => prop::collection::vec(piece, 0..30).prop_map(|v| v.concat()),
        1 => prop::collection::vec(any::<u8>(), 0..300),
    ]
}

/// The `--nodes` reading rules on the library's deserializer: an array when the text starts
/// with `[`, else one node per non-blank line. `Err` carries the 1-based line.
fn parse_like_cli(text: &str) -> Result<Vec<Node>, (usize, String)> {
    if text.trim_start().starts_with('[') {
        return serde_json::from_str::<Vec<Node>>(text).map_err(|e| (e.line(), e.to_string()));
    }
    let mut nodes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Node>(line) {
            Ok(n) => nodes.push(n),
            Err(e) => return Err((i + 1, e.to_string())),
        }
    }
    Ok(nodes)
}

#[test]
fn node_parsing_on_arbitrary_bytes() {
    run("node parsing", nodeish_bytes(), |bytes| {
        let text = String::from_utf8_lossy(&bytes);
        // A whole single object too (the CLI accepts one pretty-printed node).
        let _ = serde_json::from_str::<Node>(&text);
        match parse_like_cli(&text) {
            Ok(nodes) => {
                for n in &nodes {
                    // What the model sees and the JSON output never panic either.
                    let _ = n.llm_text();
                    let json =
                        serde_json::to_string(n).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let back: Node = serde_json::from_str(&json)
                        .map_err(|e| TestCaseError::fail(format!("re-parse: {e}")))?;
                    prop_assert_eq!(&back.id, &n.id);
                    prop_assert_eq!(&back.text, &n.text);
                }
            }
            Err((line, message)) => {
                prop_assert!(line >= 1, "error without a line: {message}");
                // An error at the end of input may name the line after a final newline.
                prop_assert!(line <= text.lines().count() + 1, "line {line} past the end");
                prop_assert!(!message.is_empty());
            }
        }
        Ok(())
    });
}
