//! `batch`'s files: the input read line by line with a size cap, the output's finished
//! ids read back for a resume (a cut last line removed), and the output appended a
//! whole line at a time.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use serde_json::Value;

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

/// What to do with a line's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdVerdict {
    /// Its line is in the output already.
    Done,
    /// A new id: run it.
    Run,
    /// An earlier line of the input has this id.
    Duplicate,
}

/// The ids in the output (how many lines each has there) and those met in the input.
#[derive(Debug, Default)]
pub struct Ids {
    in_output: HashMap<String, u32>,
    seen: HashSet<String>,
}

impl Ids {
    /// Lines already in the output.
    pub fn done(&self) -> usize {
        self.in_output.values().map(|&n| n as usize).sum()
    }

    /// The verdict for the next input line with `key`: each output line with this id
    /// accounts for one input line (the first answered, later duplicates refused).
    pub fn classify(&mut self, key: String) -> IdVerdict {
        let first = self.seen.insert(key.clone());
        if let Some(n) = self.in_output.get_mut(&key).filter(|n| **n > 0) {
            *n -= 1;
            return IdVerdict::Done;
        }
        if first {
            IdVerdict::Run
        } else {
            IdVerdict::Duplicate
        }
    }
}

/// Opens the output for appending. An existing file is read first: the ids of its
/// complete lines are returned, and a cut last line (no final newline: a run killed while
/// writing it) is truncated away.
pub fn open_output(path: &Path) -> Result<(File, Ids)> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot open the output {}", path.display()))?;
    let mut ids = Ids::default();
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
        let id = serde_json::from_slice::<Value>(&line)
            .ok()
            .and_then(|v| v.get("id").cloned());
        match id {
            Some(id) => *ids.in_output.entry(id_key(&id)).or_default() += 1,
            None => crate::output::warn(&format!(
                "line {number} of the output {} is not a batch result (no `id`): left as it is",
                path.display()
            )),
        }
    }
    drop(reader);
    let length = file.metadata()?.len();
    if length > complete {
        crate::output::note(
            false,
            &format!(
                "the output's last line was cut ({} bytes): rewriting it",
                length - complete
            ),
        );
        file.set_len(complete)
            .map_err(|e| anyhow!("cannot truncate the output's cut last line: {e}"))?;
    }
    file.seek(SeekFrom::End(0))?;
    Ok((file, ids))
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
    fn output_lines_account_for_input_lines() {
        let mut ids = Ids::default();
        ids.in_output.insert(id_key(&Value::from("a")), 2);
        assert_eq!(ids.done(), 2);
        assert_eq!(ids.classify("\"a\"".into()), IdVerdict::Done);
        assert_eq!(ids.classify("1".into()), IdVerdict::Run);
        assert_eq!(ids.classify("\"a\"".into()), IdVerdict::Done);
        assert_eq!(ids.classify("\"a\"".into()), IdVerdict::Duplicate);
        assert_eq!(ids.classify("1".into()), IdVerdict::Duplicate);
    }

    #[test]
    fn a_cut_last_line_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, "{\"id\":1}\n{\"id\":2}\n{\"id\":3,\"resp").unwrap();
        let (mut file, mut ids) = open_output(&path).unwrap();
        assert_eq!(ids.done(), 2);
        assert_eq!(ids.classify("3".into()), IdVerdict::Run);
        append_line(&mut file, "{\"id\":3}".into()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n");
        assert_eq!(count_lines(&path), Some(3));
    }
}
