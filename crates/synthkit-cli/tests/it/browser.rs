//! The HTML report as users see it: `ask --report` over the sample documents (the
//! offline backend) in refine, compact, tree_summarize and accumulate, rendered by
//! headless Chromium: every call is in the rendered page, a citation link's target
//! exists, and a screenshot is not blank.
//!
//! Chromium comes from Debian's `chromium` package (`.ci/run` installs it). Without it the
//! tests print why and pass, except in CI (`CI` set), where they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{QUESTION, examples_docs, json_of, synthkit, wait_exit};

/// Chromium's path, or `None` (with a message; a failure in CI) when it is missing.
pub fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        let found = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        });
        if found.is_some() {
            return found;
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "headless Chromium is needed in CI: apt-get install -y chromium"
    );
    eprintln!("skipped: chromium is not installed (apt-get install -y chromium)");
    None
}

/// Runs Chromium headless on `page` with `args`; its standard output.
pub fn headless(chromium: &Path, page: &Path, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stdout");
    let child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_exit(child, Duration::from_secs(120)).expect("chromium did not finish");
    assert!(status.success(), "chromium failed: {status}");
    std::fs::read_to_string(out).unwrap()
}

/// Whether the PNG at `path` shows something: more than a few colours, and more than 1%
/// of its pixels not the background's.
pub fn not_blank(path: &Path) -> bool {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let step = info.color_type.samples();
    let pixels: Vec<&[u8]> = bytes.chunks(step).map(|p| &p[..3.min(p.len())]).collect();
    let background = pixels[0];
    let other = pixels.iter().filter(|p| **p != background).count();
    let mut colours: Vec<&[u8]> = pixels.clone();
    colours.sort_unstable();
    colours.dedup();
    colours.len() > 8 && other * 100 > pixels.len()
}

/// `ask --report` in `mode` over the sample documents, small prompts so that there are
/// several calls; the report's path and the number of calls.
fn report_of(dir: &Path, mode: &str) -> (PathBuf, u64) {
    let page = dir.join(format!("{mode}.html"));
    let out = synthkit()
        .args(["ask", QUESTION, "--json", "-q", "--cite", "--mode", mode])
        .args([
            "--top-k",
            "all",
            "--chunk-size",
            "200",
            "--context-window",
            "900",
        ])
        .args(["--num-output", "120", "--report"])
        .arg(&page)
        .arg(examples_docs())
        .output()
        .unwrap();
    let report = json_of(&out);
    let calls = report["usage"]["calls"].as_u64().unwrap();
    assert!(calls > 1, "{mode}: {calls} call");
    (page, calls)
}

#[test]
fn reports_render_in_chromium_for_four_modes() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    for mode in ["refine", "compact", "tree_summarize", "accumulate"] {
        let (page, calls) = report_of(dir.path(), mode);
        let dom = headless(&chromium, &page, &["--dump-dom"]);
        for call in 1..=calls {
            assert!(
                dom.contains(&format!("id=\"call-{call}\"")),
                "{mode}: call {call} is not in the rendered page"
            );
        }
        // A citation link and its target.
        let at = dom
            .find("class=\"cite\" href=\"#")
            .unwrap_or_else(|| panic!("{mode}: no citation link"));
        let rest = &dom[at + "class=\"cite\" href=\"#".len()..];
        let target = &rest[..rest.find('"').unwrap()];
        assert!(
            dom.contains(&format!("id=\"{target}\"")),
            "{mode}: #{target} is not on the page"
        );
        assert!(dom.contains("has-js"), "{mode}: the page's script ran");
        let shot = dir.path().join(format!("{mode}.png"));
        headless(
            &chromium,
            &page,
            &[
                &format!("--screenshot={}", shot.display()),
                "--window-size=1200,900",
            ],
        );
        assert!(not_blank(&shot), "{mode}: the screenshot is blank");
    }
}
