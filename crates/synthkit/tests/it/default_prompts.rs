//! Snapshots of every default prompt, so that any change to one is deliberate and visible
//! in review. Update with `INSTA_UPDATE=always cargo test -p synthkit --test it default_prompts`
//! (or `cargo insta review`) and commit the `.snap` files.

use synthkit::prompt::{PromptBudget, PromptTemplate, RenderedPrompt, defaults};

/// The template rendered with its placeholders left in: completion text as is, chat
/// messages each under a `[role]` line.
fn show(template: &PromptTemplate) -> String {
    match template.render(&[]) {
        RenderedPrompt::Text(text) => text,
        RenderedPrompt::Chat(messages) => messages
            .iter()
            .map(|m| format!("[{}]\n{}", m.role.as_str(), m.content))
            .collect::<Vec<_>>()
            .join("\n\n"),
    }
}

/// Every default template with its name.
fn templates() -> [(&'static str, PromptTemplate); 8] {
    [
        ("qa", defaults::qa()),
        ("qa_chat", defaults::qa_chat()),
        ("refine", defaults::refine()),
        ("refine_chat", defaults::refine_chat()),
        ("summary", defaults::summary()),
        ("summary_chat", defaults::summary_chat()),
        ("simple", defaults::simple()),
        ("simple_chat", defaults::simple_chat()),
    ]
}

/// One snapshot per default template, named after it (`it__default_prompts__NAME.snap`).
#[test]
fn every_default_template() {
    for (name, template) in templates() {
        insta::assert_snapshot!(name, show(&template));
    }
}

#[test]
fn json_instructions_structured_refine() {
    let schema = serde_json::json!({
        "title": "StructuredRefineResponse",
        "type": "object",
        "properties": {
            "query_satisfied": {
                "description": "Whether the given context was enough to answer the query.",
                "type": "boolean"
            },
            "answer": {
                "description": "The answer, taken from the context rather than prior knowledge.",
                "type": "string"
            }
        },
        "required": ["query_satisfied", "answer"]
    });
    insta::assert_snapshot!(defaults::json_instructions(&schema));
}

/// What each default costs in every call's budget (cl100k_base, empty variables, chat
/// overhead included), so a longer prompt is a visible decision too.
#[test]
fn token_costs() -> Result<(), Box<dyn std::error::Error>> {
    let budget = PromptBudget::new(8192, 256)?;
    let rows = templates();
    let table = rows
        .iter()
        .map(|(name, t)| format!("{name}: {}", budget.template_tokens(t, None)))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(table);
    Ok(())
}
