//! Tests of `template`.

use super::*;

#[test]
fn finds_variables_not_json_or_formats() {
    let t = PromptTemplate::completion(
        TemplateKind::Custom,
        r#"{a} {b.c} {"x": 1} {x:>3} {} {1a} {a.} {{d}} {a}"#,
    );
    assert_eq!(t.variables(), vec!["a", "b.c", "d"]);
}

#[test]
fn one_pass_never_rescans_values() {
    let t = PromptTemplate::completion(TemplateKind::Qa, "{context_str}|{query_str}");
    let r = t.render(&[
        ("context_str", "{query_str}"),
        ("query_str", "{context_str}"),
    ]);
    assert_eq!(r.as_text(), Some("{query_str}|{context_str}"));
}

#[test]
fn unknown_stays_and_double_braces_are_not_unescaped() {
    let t = PromptTemplate::completion(TemplateKind::Qa, "{{context_str}} {other} {{json}}");
    let r = t.render(&[("context_str", "V")]);
    assert_eq!(r.as_text(), Some("{V} {other} {{json}}"));
}

#[test]
fn render_empty_fills_missing_with_nothing() {
    let t = PromptTemplate::completion(TemplateKind::Qa, "a{context_str}b{query_str}c")
        .partial("query_str", "Q");
    assert_eq!(t.render_empty(&[]).as_text(), Some("abQc"));
    assert_eq!(
        t.render_empty(&[("query_str", "R")]).as_text(),
        Some("abRc")
    );
}

#[test]
fn missing_variable_is_named() {
    let t = PromptTemplate::completion(TemplateKind::Refine, "{query_str} {context_msg}");
    let err = t.validate().unwrap_err().to_string();
    assert!(err.contains("{existing_answer}"), "{err}");
}

#[test]
fn unknown_variables_are_named_and_bounded() {
    let many: String = (0..5000).map(|i| format!("{{x{i}}} ")).collect();
    let t =
        PromptTemplate::completion(TemplateKind::Qa, format!("{{context_str}} {{tone}} {many}"))
            .partial("style", "plain");
    let err = t.check_known(&["tone"]).unwrap_err();
    let TemplateError::UnknownVariables { unknown, more, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!((unknown.len(), *more), (MAX_NAMED_VARIABLES, 4990));
    let text = err.to_string();
    assert!(
        text.contains("5000 variables") && text.contains("`{x0}`"),
        "{text}"
    );
    assert!(
        text.contains("`{x9}`") && !text.contains("`{x10}`"),
        "{text}"
    );
    assert!(text.contains("and 4990 more"), "{text}");
    assert!(
        text.contains("`{query_str}`") && text.contains("`{tone}`") && text.contains("`{style}`"),
        "{text}"
    );
    assert!(text.len() < 1000, "{text}");
    assert!(!text.contains("bug"), "{text}");
    let ok = PromptTemplate::completion(TemplateKind::Qa, "{context_str} {tone} {style}")
        .partial("style", "plain");
    assert_eq!(ok.check_known(&["tone"]), Ok(()));
}

#[test]
fn unicode_is_safe() {
    let t = PromptTemplate::completion(TemplateKind::Custom, "é{é}{a}🚀{");
    assert_eq!(t.render(&[("a", "x")]).as_text(), Some("é{é}x🚀{"));
}

#[test]
fn system_prompt() {
    let p = RenderedPrompt::Text("x".into()).with_system_prompt(Some("S"));
    assert_eq!(p.as_text(), Some("S\n\nx"));
    let c =
        RenderedPrompt::Chat(vec![ChatMessage::new(Role::User, "u")]).with_system_prompt(Some("S"));
    assert_eq!(c.to_text(), "system: S\nuser: u\nassistant: ");
}
