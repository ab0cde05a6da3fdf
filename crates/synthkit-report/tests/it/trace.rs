//! Reading traces back: a run line gives the whole record; call lines alone give the calls.

use synthkit::ResponseMode;
use synthkit_report::{TraceError, read_trace, render};

use crate::common::run;

#[tokio::test]
async fn a_run_line_round_trips() {
    let record = run(ResponseMode::TreeSummarize, "Dawn [1].").await;
    let text = format!(
        "{{\"call\":1,\"mode\":\"tree_summarize\",\"step\":\"summary\",\"level\":0,\"index\":0,\"prompt\":\"p\",\"prompt_tokens\":5,\"response\":\"r\",\"completion_tokens\":1,\"usage_reported\":false,\"ms\":1.0}}\n{}\n",
        serde_json::json!({ "run": record })
    );
    let back = read_trace(text.as_bytes()).unwrap();
    assert_eq!(back, record);
}

#[test]
fn call_lines_alone_give_the_calls() {
    let text = "{\"call\":1,\"mode\":\"refine\",\"step\":\"qa\",\"level\":0,\"index\":0,\"kind\":\"qa\",\"prompt\":\"P\",\"prompt_tokens\":10,\"counted_prompt_tokens\":9,\"response\":\"first <i>\",\"completion_tokens\":2,\"usage_reported\":true,\"ms\":3.5}\n\
                {\"call\":2,\"mode\":\"refine\",\"step\":\"refine\",\"level\":0,\"index\":1,\"kind\":\"refine\",\"prompt\":\"P\",\"prompt_tokens\":12,\"response\":\"second\",\"completion_tokens\":3,\"usage_reported\":true,\"ms\":4.0}\n";
    let run = read_trace(text.as_bytes()).unwrap();
    assert_eq!(run.steps.len(), 2);
    assert_eq!(run.usage.prompt_tokens, 22);
    assert!(run.answer.is_none());
    let page = render(&run);
    assert!(page.contains("id=\"call-2\"") && page.contains("first &lt;i&gt;"));
}

#[test]
fn bad_traces_are_clear_errors() {
    let e = read_trace("not json\n".as_bytes()).unwrap_err();
    assert!(matches!(e, TraceError::Line { line: 1, .. }), "{e}");
    assert!(matches!(read_trace("".as_bytes()), Err(TraceError::Empty)));
    let plan = "{\"call\":1,\"dry_run\":true,\"response\":\"\"}\n";
    assert!(matches!(
        read_trace(plan.as_bytes()),
        Err(TraceError::DryRun)
    ));
    let e = read_trace("{\"nothing\":1}\n".as_bytes()).unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
}
