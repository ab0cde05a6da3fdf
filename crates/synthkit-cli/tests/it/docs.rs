//! The guide (README.md and the book in docs/) checked against the repository, so it
//! cannot drift: `docs/SUMMARY.md` lists every chapter and only chapters that exist, the
//! architecture chapter names every crate and every top-level module (and no module that
//! is gone), the relative links of the README and the chapters lead to files and headings
//! that exist, and the README's offline command answers. The Rust examples of the README
//! and the chapters are doctests of `synthkit-extractive`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::{stderr, stdout, synthkit};

/// The workspace's root folder.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push(line);
        }
    }
    lines
}

/// The fenced code blocks of a Markdown text: (info string, body).
fn code_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match open.take() {
            None if trimmed.starts_with("```") => {
                open = Some((
                    trimmed.trim_start_matches('`').trim().to_string(),
                    String::new(),
                ));
            }
            None => {}
            Some(block) if trimmed.starts_with("```") => blocks.push(block),
            Some((info, mut body)) => {
                body.push_str(line);
                body.push('\n');
                open = Some((info, body));
            }
        }
    }
    blocks
}

/// The targets of the inline links `[text](target)` outside code blocks.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// A heading's anchor as GitHub and mdBook make it: lower case, letters, digits, `-` and
/// `_` kept, spaces made `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    prose_lines(text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The chapters `docs/SUMMARY.md` lists, in order.
fn summary_chapters(summary: &str) -> Vec<String> {
    summary
        .lines()
        .filter_map(|line| {
            let item = line.trim_start().strip_prefix("- [")?;
            let start = item.find("](")? + 2;
            let end = item[start..].find(')')? + start;
            Some(item[start..end].to_string())
        })
        .collect()
}

#[test]
fn docs_summary_lists_every_chapter() {
    let docs = root().join("docs");
    let summary = read(&docs.join("SUMMARY.md"));
    assert_eq!(
        summary.lines().next(),
        Some("# Summary"),
        "mdBook's first line"
    );
    let listed = summary_chapters(&summary);
    assert!(!listed.is_empty(), "SUMMARY.md lists no chapter");
    let mut seen = BTreeSet::new();
    for chapter in &listed {
        assert!(
            docs.join(chapter).is_file(),
            "SUMMARY.md lists {chapter}, which is not in docs/"
        );
        assert!(
            seen.insert(chapter.clone()),
            "SUMMARY.md lists {chapter} twice"
        );
    }
    // Every other line is blank, the title, or a list item (mdBook's format).
    for line in summary.lines().skip(1) {
        let item = line.trim_start();
        assert!(
            item.is_empty() || item.starts_with("- ["),
            "SUMMARY.md: not a chapter line: {line:?}"
        );
    }
    for entry in fs::read_dir(&docs).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            assert!(
                seen.contains(&name),
                "docs/{name} is not in docs/SUMMARY.md"
            );
        }
    }
}

#[test]
fn docs_links_lead_somewhere() {
    let root = root();
    let mut files = vec![root.join("README.md")];
    for entry in fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut checked = 0;
    for file in &files {
        let text = read(file);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            assert!(
                dest.exists(),
                "{}: the link {target} leads to no file",
                file.display()
            );
            if let Some(anchor) = anchor {
                let heads = anchors(&read(&dest));
                assert!(
                    heads.contains(anchor),
                    "{}: the link {target}: no heading #{anchor} in {} (there are {heads:?})",
                    file.display(),
                    dest.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} links found");
}

/// The top-level modules of a crate: `src/*.rs` and `src/*/`, `main` and `lib` aside.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let is_module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
        if is_module && name != "main" && name != "lib" {
            modules.insert(name);
        }
    }
    modules
}

/// Whether the module at `segments` (under `src`) exists: a file `a/b.rs` or a folder
/// `a/b/`.
fn module_exists(src: &Path, segments: &[&str]) -> bool {
    let mut path = src.to_path_buf();
    for segment in segments {
        path.push(segment);
    }
    path.is_dir() || path.with_extension("rs").is_file()
}

/// The module paths one table cell names: its backticked words outside parentheses,
/// `a::b` or `a/b`, with `a::{b, c}` expanded and `a::*` meaning `a`.
fn module_paths(cell: &str) -> Vec<Vec<String>> {
    let mut outside = String::new();
    let mut depth = 0usize;
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 => outside.push(c),
            _ => {}
        }
    }
    let mut paths = Vec::new();
    for (i, code) in outside.split('`').enumerate() {
        if i % 2 == 0 || code.trim().is_empty() {
            continue;
        }
        let code = code.trim().replace("::", "/");
        let (prefix, group) = match code.split_once("/{") {
            Some((prefix, group)) => (prefix.to_string(), Some(group.trim_end_matches('}'))),
            None => (
                code.trim_end_matches('/')
                    .trim_end_matches("/*")
                    .to_string(),
                None,
            ),
        };
        let base: Vec<String> = prefix.split('/').map(str::to_string).collect();
        match group {
            None => paths.push(base),
            Some(group) => {
                for item in group.split(',') {
                    let mut path = base.clone();
                    path.extend(item.trim().split('/').map(str::to_string));
                    paths.push(path);
                }
            }
        }
    }
    paths
}

/// The architecture chapter's module tables, by crate (`### \`name\`` under
/// `## Modules`): every module path of each table's `module` column.
fn named_modules(chapter: &str) -> Vec<(String, Vec<Vec<String>>)> {
    let mut crates: Vec<(String, Vec<Vec<String>>)> = Vec::new();
    let mut in_modules = false;
    let mut column: Option<usize> = None;
    for line in prose_lines(chapter) {
        if let Some(title) = line.strip_prefix("## ") {
            in_modules = title.trim() == "Modules";
            continue;
        }
        if !in_modules {
            continue;
        }
        if let Some(title) = line.strip_prefix("### ") {
            crates.push((title.trim().trim_matches('`').to_string(), Vec::new()));
            column = None;
            continue;
        }
        if !line.starts_with('|') {
            column = None;
            continue;
        }
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        match column {
            None => column = cells.iter().position(|c| *c == "module"),
            Some(_)
                if cells
                    .iter()
                    .all(|c| c.chars().all(|c| c == '-' || c == ':')) => {}
            Some(i) => {
                let (name, paths) = crates.last_mut().expect("a module table before any crate");
                let cell = cells
                    .get(i)
                    .unwrap_or_else(|| panic!("{name}: short row {line}"));
                paths.extend(module_paths(cell));
            }
        }
    }
    crates
}

#[test]
fn docs_architecture_names_every_crate_and_module() {
    let root = root();
    let chapter = read(&root.join("docs/architecture.md"));
    let mut crate_dirs = Vec::new();
    for parent in ["crates", "bindings"] {
        for entry in fs::read_dir(root.join(parent)).unwrap() {
            let path = entry.unwrap().path();
            if path.join("Cargo.toml").is_file() {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let shown = if parent == "crates" {
                    name
                } else {
                    format!("{parent}/{name}")
                };
                crate_dirs.push((shown, path));
            }
        }
    }
    assert!(crate_dirs.len() >= 10, "{crate_dirs:?}");

    let tables = named_modules(&chapter);
    let mut problems = Vec::new();
    for (name, dir) in &crate_dirs {
        if !chapter.contains(&format!("`{name}`")) {
            problems.push(format!("the crate {name} is not named"));
        }
        let Some((_, paths)) = tables.iter().find(|(n, _)| n == name) else {
            problems.push(format!(
                "no module table for {name} (### `{name}` under ## Modules)"
            ));
            continue;
        };
        let src = dir.join("src");
        let named: BTreeSet<String> = paths.iter().map(|p| p[0].clone()).collect();
        for module in top_level_modules(&src) {
            if !named.contains(&module) {
                problems.push(format!("{name}: the module {module} is not named"));
            }
        }
        for path in paths {
            let segments: Vec<&str> = path.iter().map(String::as_str).collect();
            if !module_exists(&src, &segments) {
                problems.push(format!(
                    "{name}: the chapter names {}, which is not in {}",
                    segments.join("::"),
                    src.display()
                ));
            }
        }
    }
    for (name, _) in &tables {
        if !crate_dirs.iter().any(|(n, _)| n == name) {
            problems.push(format!("a module table for {name}, which is no crate"));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/architecture.md is out of date:\n  {}",
        problems.join("\n  ")
    );
}

/// The commands of the README's section "The two commands", in order.
fn the_two_commands(readme: &str) -> Vec<String> {
    let start = readme
        .find("\n## The two commands\n")
        .expect("README.md has the section \"The two commands\"");
    let section = &readme[start + 1..];
    let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
    code_blocks(&section[..end])
        .into_iter()
        .filter(|(info, _)| info == "sh")
        .map(|(_, body)| body.trim().to_string())
        .collect()
}

/// A command line split as a shell splits this simple form: words, and "double-quoted"
/// words.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut in_word) = (false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(!quoted, "unbalanced quotes in {line}");
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn docs_readme_offline_command_answers() {
    let root = root();
    let readme = read(&root.join("README.md"));
    let commands = the_two_commands(&readme);
    assert_eq!(commands.len(), 2, "{commands:?}");
    // The test command is the one CI runs.
    assert_eq!(commands[1], "cargo test --workspace");
    let ci = read(&root.join(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim() == commands[1]),
        ".ci/run does not run the README's test command {:?}",
        commands[1]
    );
    // The offline command, run with the built binary from the workspace's root.
    let words = shell_words(&commands[0]);
    let prefix = ["cargo", "run", "--release", "-p", "synthkit-cli", "--"];
    assert!(words.starts_with(&prefix.map(String::from)), "{words:?}");
    let args = &words[prefix.len()..];
    assert_eq!(args.first().map(String::as_str), Some("ask"), "{args:?}");
    let out = synthkit().current_dir(&root).args(args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("every three months"), "{text}");
    assert!(text.contains("\nSources:\n"), "{text}");
    assert!(
        text.contains("examples/docs/02-telescope-maintenance.md"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("extractive answer"),
        "{}",
        stderr(&out)
    );
}
