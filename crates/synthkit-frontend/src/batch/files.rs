//! A batch's files: the input read line by line with a size cap, the request hash of a
//! line, the output's results read back for a resume (a cut last line removed; the last
//! line of an id wins), the output appended a whole line at a time and compacted to one
//! line per id at the end of a run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use synthkit::ResponseMode;

/// `e` with `what` before its message (same kind).
fn context(e: io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// One line of the input, as read.
#[derive(Debug, PartialEq, Eq)]
pub enum RawLine {
    /// Its text (a final `\r` removed).
    Text(String),
    /// It is longer than the limit: its length in bytes (it was read and dropped).
    TooLong(u64),
    /// It is not UTF-8.
    NotUtf8,
}

/// Reads lines of at most `max` bytes, holding no more than that of a longer one.
pub struct LineReader<R> {
    inner: R,
    max: usize,
    number: usize,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `inner`, each at most `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            max,
            number: 0,
        }
    }

    /// The next line and its 1-based number, or `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<(usize, RawLine)>> {
        let mut buf = Vec::new();
        let mut length: u64 = 0;
        let mut any = false;
        loop {
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            any = true;
            let newline = chunk.iter().position(|&b| b == b'\n');
            let part = chunk.get(..newline.unwrap_or(chunk.len())).unwrap_or(chunk);
            length += part.len() as u64;
            if length <= self.max as u64 {
                buf.extend_from_slice(part);
            }
            let used = part.len() + usize::from(newline.is_some());
            self.inner.consume(used);
            if newline.is_some() {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.number += 1;
        if buf.last() == Some(&b'\r') && length <= self.max as u64 {
            buf.pop();
        }
        let line = if length > self.max as u64 {
            RawLine::TooLong(length)
        } else {
            String::from_utf8(buf).map_or(RawLine::NotUtf8, RawLine::Text)
        };
        Ok(Some((self.number, line)))
    }
}

/// The key of an id in the sets of ids: its JSON text (`"a"` and `1` differ).
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// The fields of an input line that its request hash leaves out: the line's name, and
/// knobs that do not change the answer.
const UNHASHED: [&str; 4] = ["id", "concurrency", "report", "stream"];

/// The request hash of a line's fields: SHA-256, in lowercase hex, of the canonical JSON
/// (object keys sorted, no spaces) of every field but `id`, `concurrency`, `report` and
/// `stream`, with `mode` (its canonical name) and `max_prompt_tokens` filled in from the
/// batch's defaults when the line leaves them out.
pub fn request_hash(
    fields: &Map<String, Value>,
    mode: ResponseMode,
    max_prompt_tokens: Option<usize>,
) -> String {
    let mut hashed: Vec<(&str, Value)> = fields
        .iter()
        .filter(|(k, _)| !UNHASHED.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let canonical_mode = match fields.get("mode") {
        None | Some(Value::Null) => Some(mode.as_str()),
        Some(Value::String(m)) => ResponseMode::from_str(m).ok().map(ResponseMode::as_str),
        Some(_) => None,
    };
    if let Some(m) = canonical_mode {
        hashed.retain(|(k, _)| *k != "mode");
        hashed.push(("mode", Value::from(m)));
    }
    if matches!(fields.get("max_prompt_tokens"), None | Some(Value::Null)) {
        hashed.retain(|(k, _)| *k != "max_prompt_tokens");
        if let Some(n) = max_prompt_tokens {
            hashed.push(("max_prompt_tokens", Value::from(n)));
        }
    }
    hashed.sort_by(|a, b| a.0.cmp(b.0));
    let mut hasher = Sha256::new();
    hasher.update(b"{");
    for (i, (k, v)) in hashed.iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        hash_json(&Value::from(*k), &mut hasher);
        hasher.update(b":");
        hash_json(v, &mut hasher);
    }
    hasher.update(b"}");
    hex(&hasher.finalize())
}

/// The SHA-256, in lowercase hex, of the canonical JSON (object keys sorted, no spaces)
/// of the object made of `fields` (a later field of the same name replaces an earlier
/// one): how `synthkit eval` names the version of a case or an answers line it scored.
pub fn fields_sha256<'a>(fields: impl IntoIterator<Item = (&'a str, &'a Value)>) -> String {
    let sorted: BTreeMap<&str, &Value> = fields.into_iter().collect();
    let mut hasher = Sha256::new();
    hasher.update(b"{");
    for (i, (k, v)) in sorted.into_iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        hash_json(&Value::from(k), &mut hasher);
        hasher.update(b":");
        hash_json(v, &mut hasher);
    }
    hasher.update(b"}");
    hex(&hasher.finalize())
}

/// The hash of a line that is not a JSON object: SHA-256 of its text.
pub fn text_hash(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        s.push_str(&format!("{b:02x}"));
        s
    })
}

/// Feeds `value`'s canonical JSON to `hasher`: object keys sorted, no whitespace.
fn hash_json(value: &Value, hasher: &mut Sha256) {
    match value {
        Value::Object(m) => {
            let mut fields: Vec<(&String, &Value)> = m.iter().collect();
            fields.sort_by(|a, b| a.0.cmp(b.0));
            hasher.update(b"{");
            for (i, (k, v)) in fields.into_iter().enumerate() {
                if i > 0 {
                    hasher.update(b",");
                }
                hasher.update(serde_json::to_string(k).unwrap_or_default().as_bytes());
                hasher.update(b":");
                hash_json(v, hasher);
            }
            hasher.update(b"}");
        }
        Value::Array(a) => {
            hasher.update(b"[");
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    hasher.update(b",");
                }
                hash_json(v, hasher);
            }
            hasher.update(b"]");
        }
        other => hasher.update(serde_json::to_string(other).unwrap_or_default().as_bytes()),
    }
}

/// What an output line holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// A response.
    Answered,
    /// An error line: its kind, and its transient cause (`transport`, `timeout`,
    /// `rate_limited`, `server_error`) when sending the request again may succeed.
    Failed {
        /// `error.kind`.
        kind: String,
        /// `error.transient`.
        transient: Option<String>,
    },
}

/// The result in the output for one id (its last line there).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The request hash it answered (`None` in lines written before hashes were kept).
    pub hash: Option<String>,
    /// What it holds.
    pub held: Held,
}

/// What to do with an input line, given the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its result is in the output: kept (`Some(kind)` when it is an error line).
    Keep(Option<String>),
    /// Its error line is transient: run again (`kind: cause`).
    Retry(String),
    /// The output's result for its id answered another request: run again.
    Changed,
    /// Not in the output: run.
    New,
}

/// The results already in the output, by id (a later line for an id supersedes an
/// earlier one: a resumed run appends a retried line's new result).
#[derive(Debug, Default)]
pub struct Existing {
    entries: HashMap<String, Entry>,
    /// Lines superseded by a later line with the same id (removed at the end of the run).
    pub superseded: usize,
    /// The numbers of the output's lines that are not batch results (no `id`): left as
    /// they are.
    pub not_results: Vec<usize>,
    /// The bytes of a cut last line (a run killed while writing it), removed.
    pub cut: Option<u64>,
}

impl Existing {
    /// Results in the output.
    pub fn done(&self) -> usize {
        self.entries.len()
    }

    /// Error lines among them.
    pub fn errors(&self) -> usize {
        self.entries
            .values()
            .filter(|e| matches!(e.held, Held::Failed { .. }))
            .count()
    }

    /// What to do with an input line whose id has `key` and whose request hashes to
    /// `hash`; `retry` (the default): run the transient error lines again.
    pub fn verdict(&self, key: &str, hash: Option<&str>, retry: bool) -> Verdict {
        let Some(entry) = self.entries.get(key) else {
            return Verdict::New;
        };
        // A line written before hashes were kept, or one that cannot be hashed, is
        // trusted as before.
        if let (Some(old), Some(new)) = (entry.hash.as_deref(), hash)
            && old != new
        {
            return Verdict::Changed;
        }
        match &entry.held {
            Held::Answered => Verdict::Keep(None),
            Held::Failed {
                kind,
                transient: Some(cause),
            } if retry => Verdict::Retry(format!("{kind}: {cause}")),
            Held::Failed { kind, .. } => Verdict::Keep(Some(kind.clone())),
        }
    }

    /// Whether the output's result for `key` is an error line.
    pub fn is_error(&self, key: &str) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| matches!(e.held, Held::Failed { .. }))
    }
}

/// The transient cause of an error line written before `error.transient` was kept, from
/// its kind and message.
fn legacy_transient(kind: &str, message: &str) -> Option<String> {
    let cause = match kind {
        "model_timeout" => "timeout",
        "model_rate_limited" => "rate_limited",
        "model_error" if message.contains("connection to the model failed") => "transport",
        "model_error" if message.contains("streamed reply was cut off") => "transport",
        "model_error" if message.contains("server error (HTTP 5") => "server_error",
        _ => return None,
    };
    Some(cause.to_string())
}

/// The id and entry of an output line, if it is a batch result.
fn read_entry(line: &[u8]) -> Option<(String, Entry)> {
    let value = serde_json::from_slice::<Value>(line).ok()?;
    let id = value.get("id")?;
    let hash = value
        .get("request_sha256")
        .and_then(Value::as_str)
        .map(str::to_string);
    let held = match value.get("error") {
        Some(error) => {
            let text = |f: &str| error.get(f).and_then(Value::as_str).unwrap_or_default();
            let kind = text("kind").to_string();
            let transient = match error.get("transient") {
                Some(t) => t.as_str().map(str::to_string),
                None => legacy_transient(&kind, text("message")),
            };
            Held::Failed { kind, transient }
        }
        None => Held::Answered,
    };
    Some((id_key(id), Entry { hash, held }))
}

/// Opens the output for appending. An existing file is read first: the result of each
/// id in its complete lines is returned (the last line of an id wins), and a cut last
/// line (no final newline: a run killed while writing it) is truncated away.
/// Errors: the file cannot be opened, read or truncated (the message names it).
pub fn open_output(path: &Path) -> io::Result<(File, Existing)> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| context(e, format_args!("cannot open the output {}", path.display())))?;
    let mut existing = Existing::default();
    let mut complete: u64 = 0;
    let mut reader = BufReader::new(&file);
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        number += 1;
        complete += n as u64;
        match read_entry(&line) {
            Some((key, entry)) => {
                if existing.entries.insert(key, entry).is_some() {
                    existing.superseded += 1;
                }
            }
            None => existing.not_results.push(number),
        }
    }
    drop(reader);
    let length = file.metadata()?.len();
    if length > complete {
        existing.cut = Some(length - complete);
        file.set_len(complete)
            .map_err(|e| context(e, "cannot truncate the output's cut last line"))?;
    }
    file.seek(SeekFrom::End(0))?;
    Ok((file, existing))
}

/// What a compacted output holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    /// Its lines.
    pub lines: usize,
    /// Its error lines, by kind.
    pub errors: BTreeMap<String, usize>,
}

/// The temporary file [`compact`] writes next to `path`.
pub fn compact_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.compacting"))
}

/// Rewrites the output with one line per id: each id's last line, at the place of its
/// first (so an ordered batch stays in input order); lines that are not batch results
/// stay where they are. The new text goes to a temporary file beside it, synced, then
/// renamed over it: a run killed here leaves the old output whole (the last line of an
/// id still wins when it is read again) and at worst a stale temporary file, replaced
/// next time.
pub fn compact(path: &Path) -> io::Result<Compacted> {
    // Pass 1: where each id's last line starts.
    let mut last: HashMap<String, u64> = HashMap::new();
    let mut reader = BufReader::new(File::open(path)?);
    let mut line = Vec::new();
    let mut offset: u64 = 0;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        if let Some((key, _)) = read_entry(&line) {
            last.insert(key, offset);
        }
        offset += n as u64;
    }
    // Pass 2: each id's last line where its first was.
    let temp = compact_path(path);
    let mut out = std::io::BufWriter::new(
        File::create(&temp)
            .map_err(|e| context(e, format_args!("cannot write {}", temp.display())))?,
    );
    let mut reader = BufReader::new(File::open(path)?);
    let mut lookup = File::open(path)?;
    let mut written: HashSet<String> = HashSet::new();
    let mut compacted = Compacted::default();
    let mut offset: u64 = 0;
    let mut other = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        let here = offset;
        offset += n as u64;
        let Some((key, entry)) = read_entry(&line) else {
            out.write_all(&line)?;
            compacted.lines += 1;
            continue;
        };
        if written.contains(&key) {
            continue;
        }
        let at = last.get(&key).copied().unwrap_or(here);
        let (text, entry) = if at == here {
            (&line, entry)
        } else {
            lookup.seek(SeekFrom::Start(at))?;
            other.clear();
            BufReader::new(&mut lookup).read_until(b'\n', &mut other)?;
            let entry = read_entry(&other).map_or(entry, |(_, e)| e);
            (&other, entry)
        };
        out.write_all(text)?;
        if let Held::Failed { kind, .. } = entry.held {
            *compacted.errors.entry(kind).or_default() += 1;
        }
        compacted.lines += 1;
        written.insert(key);
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, path).map_err(|e| {
        let what = format!("cannot replace {} by {}", path.display(), temp.display());
        context(e, what)
    })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Best effort: the rename reaches the disk with the folder's entry.
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(compacted)
}

/// Appends `line` and a newline in one write, so that a killed run leaves whole lines
/// (at worst one cut line, removed by the next run).
pub fn append_line(file: &mut File, mut line: String) -> io::Result<()> {
    line.push('\n');
    file.write_all(line.as_bytes())
}

/// Lines in a file (for the progress bar's length), counting a last line without its
/// newline; `None` for standard input.
pub fn count_lines(path: &Path) -> Option<u64> {
    let file = File::open(path).ok()?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let chunk = reader.fill_buf().ok()?;
        let Some(&end) = chunk.last() else { break };
        lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        last = end;
        let n = chunk.len();
        reader.consume(n);
    }
    Some(lines + u64::from(last != b'\n'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn lines(text: &str, max: usize) -> Vec<(usize, RawLine)> {
        let mut r = LineReader::new(BufReader::with_capacity(4, text.as_bytes()), max);
        std::iter::from_fn(|| r.next_line().unwrap()).collect()
    }

    #[test]
    fn lines_are_capped_and_numbered() {
        let got = lines("ab\r\n0123456789\n\nxyz", 5);
        assert_eq!(
            got,
            vec![
                (1, RawLine::Text("ab".into())),
                (2, RawLine::TooLong(10)),
                (3, RawLine::Text(String::new())),
                (4, RawLine::Text("xyz".into())),
            ]
        );
        assert!(lines("", 5).is_empty());
    }

    #[test]
    fn the_last_line_of_an_id_wins_and_transient_errors_are_retried() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let lines = [
            r#"{"id":"a","request_sha256":"h1","error":{"kind":"model_error","message":"m","transient":"transport"}}"#,
            r#"{"id":"b","request_sha256":"h2","error":{"kind":"invalid_request","message":"m"}}"#,
            r#"{"id":1,"request_sha256":"h3","response":{}}"#,
            r#"{"id":"c","error":{"kind":"model_timeout","message":"no answer"}}"#,
            r#"{"id":"a","request_sha256":"h1","response":{"text":"new"}}"#,
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let (_, existing) = open_output(&path).unwrap();
        assert_eq!(existing.done(), 4);
        assert_eq!(existing.superseded, 1);
        assert_eq!(existing.errors(), 2);
        assert_eq!(
            existing.verdict("\"a\"", Some("h1"), true),
            Verdict::Keep(None)
        );
        assert_eq!(
            existing.verdict("\"a\"", Some("h9"), true),
            Verdict::Changed
        );
        let bad = Verdict::Keep(Some("invalid_request".into()));
        assert_eq!(existing.verdict("\"b\"", Some("h2"), true), bad);
        assert_eq!(existing.verdict("1", Some("h3"), true), Verdict::Keep(None));
        assert_eq!(existing.verdict("\"1\"", Some("h3"), true), Verdict::New);
        // A line written before hashes and `transient` were kept.
        let retry = Verdict::Retry("model_timeout: timeout".into());
        assert_eq!(existing.verdict("\"c\"", Some("h4"), true), retry);
        let keep = Verdict::Keep(Some("model_timeout".into()));
        assert_eq!(existing.verdict("\"c\"", Some("h4"), false), keep);

        let compacted = compact(&path).unwrap();
        assert_eq!(compacted.lines, 4);
        assert_eq!(compacted.errors.values().sum::<usize>(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        let kept: Vec<&str> = text.lines().collect();
        assert_eq!(kept, [lines[4], lines[1], lines[2], lines[3]]);
        assert!(!compact_path(&path).exists());
    }

    #[test]
    fn the_request_hash_is_canonical() {
        let fields = |text: &str| {
            let value: Value = serde_json::from_str(text).unwrap();
            value.as_object().unwrap().clone()
        };
        let h = |text: &str| request_hash(&fields(text), ResponseMode::Compact, None);
        let a = h(r#"{"query":"q","nodes":["a",{"text":"b","metadata":{"x":1,"y":2}}]}"#);
        assert_eq!(a.len(), 64);
        // Key order, the id, runtime knobs and the default mode written out do not count.
        let same = h(
            r#"{"id":7,"concurrency":2,"mode":"Compact","nodes":["a",{"metadata":{"y":2,"x":1},"text":"b"}],"query":"q"}"#,
        );
        assert_eq!(a, same);
        assert_ne!(a, h(r#"{"query":"q","nodes":["b","a"]}"#));
        assert_ne!(
            a,
            h(r#"{"query":"q2","nodes":["a",{"text":"b","metadata":{"x":1,"y":2}}]}"#)
        );
        let refine =
            r#"{"query":"q","nodes":["a",{"text":"b","metadata":{"x":1,"y":2}}],"mode":"refine"}"#;
        assert_ne!(a, h(refine));
        // The batch's defaults count for the lines that leave them out.
        let text = r#"{"query":"q","nodes":["a",{"text":"b","metadata":{"x":1,"y":2}}]}"#;
        assert_eq!(
            request_hash(&fields(text), ResponseMode::Refine, None),
            h(refine)
        );
        assert_ne!(
            request_hash(&fields(text), ResponseMode::Compact, Some(100)),
            a
        );
    }

    #[test]
    fn fields_hash_as_the_canonical_object() {
        let (a, b, one) = (Value::from("a"), Value::from("b"), Value::from(1));
        let h = fields_sha256([("y", &a), ("x", &one)]);
        assert_eq!(h, fields_sha256([("x", &one), ("y", &a)]));
        assert_ne!(h, fields_sha256([("x", &one), ("y", &b)]));
        // The same bytes as the text `{"x":1,"y":"a"}`.
        assert_eq!(h, text_hash(r#"{"x":1,"y":"a"}"#));
    }

    #[test]
    fn a_cut_last_line_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, "{\"id\":1}\n{\"id\":2}\n{\"id\":3,\"resp").unwrap();
        let (mut file, existing) = open_output(&path).unwrap();
        assert_eq!(existing.done(), 2);
        assert_eq!(existing.verdict("3", None, true), Verdict::New);
        append_line(&mut file, "{\"id\":3}".into()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n");
        assert_eq!(count_lines(&path), Some(3));
    }
}
