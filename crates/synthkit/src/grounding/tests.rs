use super::*;

/// The facts of `answer` (question aside) as written.
fn written(answer: &str, question: &str) -> Vec<String> {
    facts(answer, question)
        .into_iter()
        .map(|f| f.text)
        .collect()
}

fn status(answer: &str, source: &str) -> GroundingStatus {
    check(answer, "", &[source]).status
}

#[test]
fn a_year_in_no_source_is_unsupported() {
    let sources = [
        "Drummelo is a fishing town on the north coast.",
        "Its harbour was built in 1890 and its church in 1902.",
    ];
    let g = check(
        "Drummelo was founded in 1935.",
        "When was Drummelo founded?",
        &sources,
    );
    assert_eq!(g.status, GroundingStatus::Unsupported);
    assert_eq!(g.unsupported, ["1935"]);
    assert_eq!((g.checked, g.found, g.unsupported_count()), (1, 0, 1));
    assert!(g.sources.is_empty() && g.derived.is_empty() && !g.truncated);
}

#[test]
fn a_wrong_name_and_frequency_are_listed() {
    let sources = [
        "The survey was led by Dr. Jane Doe of the observatory.",
        "She measured the beacon at 41.2 MHz.",
    ];
    let answer = "The survey was led by Dr. John Smith, who measured the beacon at 42.8 MHz.";
    let g = check(answer, "Who led the survey?", &sources);
    assert_eq!(g.status, GroundingStatus::Partly);
    assert_eq!(g.unsupported, ["Dr. John Smith", "42.8"]);
    assert_eq!((g.checked, g.found), (3, 1)); // MHz is in source 1
    assert_eq!(g.sources, [1]);
}

#[test]
fn a_right_version_is_in_a_longer_one() {
    let sources = ["MSRV: `1.70.0`"];
    let answer = "The current MSRV of Tokio is 1.70.";
    let g = check(answer, "What is Tokio's MSRV?", &sources);
    assert_eq!(g.status, GroundingStatus::Supported, "{g:?}");
    assert_eq!((g.checked, g.found), (1, 1));
    assert_eq!(g.sources, [0]);
    // Without the question, Tokio is a claim of the answer, and in no source.
    let g = check(answer, "", &sources);
    assert_eq!(g.status, GroundingStatus::Partly);
    assert_eq!(g.unsupported, ["Tokio"]);
}

#[test]
fn a_quoted_word_is_in_a_flag() {
    let source = "Build it with cargo build --features=bundled to link SQLite.";
    assert_eq!(
        status("Turn on the \"bundled\" feature.", source),
        GroundingStatus::Supported
    );
    assert_eq!(
        status("Use `--features=bundled`.", source),
        GroundingStatus::Supported
    );
    let g = check("Turn on the \u{201C}static\u{201D} feature.", "", &[source]);
    assert_eq!(g.unsupported, ["static"]);
}

#[test]
fn numbers_compare_as_numbers() {
    for (answer, source) in [
        ("It is cleaned every six months.", "Cleaned every 6 months."),
        ("It is cleaned every 6 months.", "Cleaned every six months."),
        ("Twenty-one stops.", "It has 21 stops."),
        ("It has twenty one stops.", "It has 21 stops."),
        ("It seats 1,000 people.", "Seats: 1000."),
        ("It seats 1000 people.", "It seats 1,000."),
        ("A ticket costs $3.50.", "Tickets are 3.5 dollars."),
        ("About 50% of riders.", "50 percent of riders."),
        ("It came 3rd.", "It came third."),
        ("It has 007 cars.", "It has 7 cars."),
    ] {
        assert_eq!(
            status(answer, source),
            GroundingStatus::Supported,
            "{answer}"
        );
    }
    for (answer, source) in [
        ("It seats 1,001 people.", "It seats 1,000."),
        (
            "It is cleaned every seven months.",
            "Cleaned every 6 months.",
        ),
        ("The ratio is 1.65.", "The ratio is 1.650."),
    ] {
        assert_eq!(
            status(answer, source),
            GroundingStatus::Unsupported,
            "{answer}"
        );
    }
}

#[test]
fn a_difference_of_two_lengths_is_derived() {
    let sources = [
        "Line 7 is 9.3 km long.",
        "Line 4 is 12.5 km long and line 7 is 9.3 km long.",
    ];
    let question = "How much longer is tram line 4 than line 7?";
    let g = check("Line 4 is 3.2 km longer than line 7.", question, &sources);
    assert_eq!(g.status, GroundingStatus::Supported);
    assert_eq!(g.derived, ["3.2"]);
    assert_eq!(g.sources, [1]);
    // A sum is derived too; a number neither is not.
    let g = check("Together they are 21.8 km long.", "", &sources);
    assert_eq!(g.derived, ["21.8"]);
    let g = check("Line 4 is 3.4 km longer.", question, &sources);
    assert_eq!(g.status, GroundingStatus::Unsupported);
    assert_eq!(g.unsupported, ["3.4"]);
}

#[test]
fn lookups_stand_on_word_boundaries() {
    assert_eq!(
        status("It is \"effective\".", "It is ineffective."),
        GroundingStatus::Unsupported
    );
    for source in ["Rust 1.65.0 is out.", "Requires `1.65.0`.", "(1.65)"] {
        assert_eq!(
            check("It needs 1.65.", "", &[source]).status,
            GroundingStatus::Supported,
            "{source}"
        );
    }
    for source in ["It needs 11.65.", "It needs 1.650."] {
        assert_eq!(
            status("It needs 1.65.", source),
            GroundingStatus::Unsupported,
            "{source}"
        );
    }
    assert_eq!(
        status("Get v2.3 now.", "Version 2.3.1."),
        GroundingStatus::Supported
    );
    assert_eq!(
        status("Get 2.3.1 now.", "Get v2.3.1."),
        GroundingStatus::Supported
    );
    assert_eq!(
        status("Get 2.3.1 now.", "Get v12.3.1."),
        GroundingStatus::Unsupported
    );
    assert_eq!(
        status("It is in New York.", "It is in New Yorkshire."),
        GroundingStatus::Unsupported
    );
}

#[test]
fn text_is_normalised_before_lookups() {
    let source = "Order a cafe\u{301} au  \n lait \u{2018}here\u{2019}.";
    assert_eq!(
        status("Order a \"Café au lait\".", source),
        GroundingStatus::Supported
    );
    assert_eq!(
        status("It says \"'here'\".", source),
        GroundingStatus::Supported
    );
}

#[test]
fn dates_compare_as_dates() {
    for (answer, source) in [
        ("It opened on March 3, 2020.", "Opened 2020-03-03."),
        ("It opened on 2020-03-03.", "Opened on 3 March 2020."),
        ("It opened on 3rd March 2020.", "Opened on March 3, 2020."),
        ("It opened in March 2020.", "Opened on March 3, 2020."),
        ("It opened on Mar. 3.", "Opened on March 3, 2020."),
    ] {
        assert_eq!(
            status(answer, source),
            GroundingStatus::Supported,
            "{answer}"
        );
    }
    assert_eq!(
        written("It opened on March 3, 2020 at 9.", ""),
        ["March 3, 2020", "9"]
    );
    assert_eq!(
        status("It opened on March 4, 2020.", "Opened on March 3, 2020."),
        GroundingStatus::Unsupported
    );
}

#[test]
fn code_and_identifiers_are_facts() {
    let answer = "Call `Builder::new` in src/lib.rs with MAX_FACTS, run cargo test --release \
                  and see Cargo.toml, crate::grounding and toString.";
    assert_eq!(
        written(answer, ""),
        [
            "Builder::new",
            "src/lib.rs",
            "MAX_FACTS",
            "--release",
            "Cargo.toml",
            "crate::grounding",
            "toString",
        ]
    );
    let source = "The crate::grounding module (src/lib.rs) reads MAX_FACTS; Builder::new() \
                  builds; cargo test --release; Cargo.toml; toString";
    assert_eq!(
        check(answer, "", &[source]).status,
        GroundingStatus::Supported
    );
    let g = check("Run it with `--locked`.", "", &[source]);
    assert_eq!(g.unsupported, ["--locked"]);
}

#[test]
fn names_and_sentence_openers() {
    let answer = "The bridge spans the Tay. It was designed by Thomas Bouch. Yes, it fell in \
                  1879. Typically, The Courier reported it. In Dundee, J. R. Smith's crew \
                  rebuilt it.";
    assert_eq!(
        written(answer, ""),
        [
            "Tay",
            "Thomas Bouch",
            "1879",
            "The Courier",
            "Dundee",
            "J. R. Smith's"
        ]
    );
    let source = "Thomas Bouch designed the bridge over the Tay, which fell in 1879; the \
                  Courier reported. In Dundee, J. R. Smith led the crew.";
    assert_eq!(
        check(answer, "", &[source]).status,
        GroundingStatus::Supported
    );
    // A sentence's first word is a name unless it is a common opener.
    assert_eq!(
        written("Drummelo lies north. It is small.", ""),
        ["Drummelo"]
    );
    // A line's first word and a list's item open sentences too.
    assert_eq!(written("Answer:\n- The dome\n1. Yes\n2) Tay", ""), ["Tay"]);
}

#[test]
fn what_the_question_names_is_not_checked() {
    let question = "When was Drummelo founded, and by whom? Was it in 1935?";
    assert!(written("Drummelo was founded in 1935.", question).is_empty());
    let g = check("Drummelo was founded in 1935 by Ann Kerr.", question, &[""]);
    assert_eq!(g.unsupported, ["Ann Kerr"]);
    // A name the question names in part is a claim.
    assert_eq!(
        written("It was Drummelo Castle.", question),
        ["Drummelo Castle"]
    );
}

#[test]
fn markers_and_the_engines_own_answer_are_not_facts() {
    assert_eq!(
        written("Built in 1890 [1], rebuilt in 1902 [2, 3][4-5].", ""),
        ["1890", "1902"]
    );
    let g = check(
        DEFAULT_NOT_IN_SOURCES_ANSWER,
        "When was Drummelo founded?",
        &["x"],
    );
    assert_eq!((g.status, g.checked), (GroundingStatus::Supported, 0));
    let shouted = DEFAULT_NOT_IN_SOURCES_ANSWER.to_uppercase();
    assert!(written(&shouted, "").is_empty());
    assert_eq!(
        written(&format!("{DEFAULT_NOT_IN_SOURCES_ANSWER} Tay."), ""),
        ["Tay"]
    );
}

#[test]
fn status_follows_what_was_found() {
    let g = check("it is small and quiet.", "", &["x"]);
    assert_eq!((g.status, g.checked), (GroundingStatus::Supported, 0));
    let g = check("Tay and Ness.", "", &["the Tay"]);
    assert_eq!(g.status, GroundingStatus::Partly);
    assert_eq!(g.unsupported, ["Ness"]);
    let g = check("Tay and Ness.", "", &[] as &[&str]);
    assert_eq!(g.status, GroundingStatus::Unsupported);
    assert_eq!(GroundingStatus::Partly.to_string(), "partly");
}

#[test]
fn sources_are_ranked_by_the_facts_they_hold() {
    let sources = ["Ness.", "Tay, Ness and 1879.", "nothing", "Tay."];
    let g = check("The Tay, the Ness and 1879.", "", &sources);
    assert_eq!(g.status, GroundingStatus::Supported);
    assert_eq!(g.sources, [1, 0, 3]);
}

#[test]
fn grounding_is_json_of_the_issues_shape() {
    let g = check("Drummelo was founded in 1935.", "When?", &["Drummelo"]);
    let json = serde_json::to_value(&g).unwrap();
    assert_eq!(json["status"], "partly");
    assert_eq!(json["unsupported"], serde_json::json!(["1935"]));
    let back: Grounding = serde_json::from_value(json).unwrap();
    assert_eq!(back, g);
    let minimal: Grounding =
        serde_json::from_str(r#"{"status": "unsupported", "unsupported": ["1935"]}"#).unwrap();
    assert_eq!(minimal.status, GroundingStatus::Unsupported);
    assert_eq!(minimal.checked, 0);
    let fact = serde_json::to_value(&facts("Tay.", "")[0]).unwrap();
    assert_eq!(fact, serde_json::json!({"kind": "name", "text": "Tay"}));
}

#[test]
fn bounds_hold_on_a_megabyte_of_digits() {
    let digits = "7".repeat(1 << 20);
    let g = check(&digits, "", &[digits.as_str()]);
    assert!(g.truncated);
    assert_eq!(g.checked, 1);
    assert!(
        g.unsupported
            .iter()
            .all(|s| s.chars().count() <= MAX_SPAN_CHARS + 1)
    );

    let numbers: Vec<String> = (0..200_000).map(|n| n.to_string()).collect();
    let answer = numbers.join(" ");
    assert!(answer.len() > 1 << 20);
    let g = check(&answer, "", &["0 1 2"]);
    assert!(g.truncated);
    assert_eq!(g.checked, MAX_FACTS);
    assert_eq!(g.derived, ["3"]); // 1 + 2
    assert_eq!(g.found, 4);
    assert_eq!(g.unsupported.len(), MAX_LISTED);
    assert!(facts(&answer, "").len() <= MAX_FACTS);
}

#[test]
fn no_input_makes_it_panic() {
    let pieces = [
        "\"",
        "`",
        "```",
        "[",
        "[1",
        "]",
        "Dr.",
        "J.",
        "v",
        "1.",
        "1,",
        "1.2.",
        "-",
        "--",
        "_",
        "é",
        "\u{301}",
        "\u{2019}s",
        "::",
        "/",
        "İ",
        "\u{201C}",
        " ",
        "\n",
        "A",
        "x86",
    ];
    let mut text = String::new();
    for (i, a) in pieces.iter().enumerate() {
        for b in &pieces[i..] {
            text.push_str(a);
            text.push_str(b);
        }
    }
    let many = text.repeat(40);
    for t in [&text, &many] {
        let g = check(t, t, &[t.as_str(), ""]);
        assert!(g.checked <= MAX_FACTS && g.unsupported.len() <= MAX_LISTED);
    }
    for p in pieces {
        let long = p.repeat(100_000);
        let g = check(&long, &long, &[long.as_str()]);
        assert!(g.unsupported.len() <= MAX_LISTED, "{p:?}");
    }
}

#[test]
fn quoted_punctuation_opens_no_quote_running_on_to_the_next() {
    // The closing mark of `"."` read as an opening one made a quote of everything up to
    // `"stop!"`, the number inside it was lost, and the answer read as unsupported.
    let answer = "The separator is \".\" [2]. Fixed a crash ([#6635]) [3]. It says \"stop!\" [5]!";
    assert_eq!(written(answer, ""), ["Fixed", "#6635", "stop!"]);
    let g = check(answer, "", &["Fact 6635 of the collection."]);
    assert_eq!(g.status, GroundingStatus::Partly, "{g:?}");
    assert_eq!(g.unsupported, ["Fixed", "stop!"]);
    // A straight mark followed by a space opens nothing.
    assert_eq!(written("It ends \" here, 1935.", ""), ["1935"]);
}

#[test]
fn a_possessive_ends_a_name() {
    let source = "Tokio keeps a rolling MSRV policy. The current MSRV is 1.85.";
    assert_eq!(
        status("Tokio's MSRV is 1.85.", source),
        GroundingStatus::Supported
    );
    assert_eq!(
        written("Tokio's MSRV is 1.85.", ""),
        ["Tokio's", "MSRV", "1.85"]
    );
    // A name in no source is still one.
    assert_eq!(
        status("Varnholm's MSRV is 1.85.", source),
        GroundingStatus::Partly
    );
}
