//! The offline provider through the [`Provider`] trait, on the requests the
//! runtime sends for the booking and support examples (flows/booking.flow,
//! flows/support.yaml), one understand call per user message of the
//! transcripts in issue 6.

use super::*;
use crate::llm::{FieldSpec, FlowChoice, NoTools, Question, ToolLoop, reply_with_tools};
use serde_json::{Value, json};

const TODAY: &str = "2026-01-05";

/// A field spec with nothing but a name and a type (shared with the
/// unit tests of `extract`).
pub(super) fn field(name: &str, kind: &str) -> FieldSpec {
    FieldSpec::bare(name, kind)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

/// The booking schema as the runtime describes it.
fn booking_fields(asked: Option<&str>) -> Vec<FieldSpec> {
    let mut hotel = field("hotel", "string");
    hotel.description = Some("Name of the hotel".into());
    hotel.examples = strings(&["Grand Hotel", "Overlook", "Ritz Paris"]);
    let mut date = field("date", "date");
    date.description = Some("Check-in date".into());
    let mut guests = field("guests", "int");
    guests.description = Some("Number of guests".into());
    guests.min = Some(1.0);
    guests.max = Some(10.0);
    let mut confirmed = field("confirmed", "bool");
    confirmed.description = Some("Whether the guest confirmed the booking".into());
    // The flow's `requires` are pre-extracted on every message; the
    // current step adds what it collects.
    let mut fields = vec![hotel, date, guests];
    if asked == Some("confirmed") {
        fields.push(confirmed);
    }
    for field in &mut fields {
        field.asked = asked == Some(field.name.as_str());
    }
    fields
}

fn booking_flow() -> FlowChoice {
    FlowChoice {
        name: "booking".into(),
        title: Some("Book a hotel room".into()),
        when: strings(&["the user wants to book a hotel room"]),
        examples: strings(&["Grand Hotel", "Overlook", "Ritz Paris"]),
    }
}

fn change_date() -> Question {
    Question { id: "booking.confirm#2".into(), when: strings(&["the user wants to change the date"]) }
}

/// One booking turn with the active step asking `asked`.
fn booking_turn(message: &str, asked: Option<&str>) -> Understanding {
    let request = UnderstandRequest {
        message: message.into(),
        active_flow: Some("booking".into()),
        flows: vec![booking_flow()],
        fields: booking_fields(asked),
        conditions: vec![change_date()],
        today: TODAY.into(),
        ..Default::default()
    };
    understand(&request)
}

fn understand(request: &UnderstandRequest) -> Understanding {
    let result = Offline::new().understand(request);
    assert!(result.is_ok(), "{result:?}");
    result.unwrap_or_default()
}

fn fields_of(understanding: &Understanding) -> Value {
    Value::Object(understanding.fields.iter().map(|(name, proposal)| (name.clone(), proposal.value.clone())).collect())
}

/// Each value's evidence, as the model would cite it.
fn evidence_of(understanding: &Understanding) -> Value {
    Value::Object(
        understanding
            .fields
            .iter()
            .map(|(name, proposal)| (name.clone(), Value::from(proposal.evidence.clone().unwrap_or_default())))
            .collect(),
    )
}

#[test]
fn name_is_offline() {
    assert_eq!(Offline::new().name(), "offline");
}

#[test]
fn booking_routes_among_several_flows() {
    let billing = FlowChoice {
        name: "billing".into(),
        title: Some("Billing and refunds".into()),
        when: strings(&["the user has a billing question or wants a refund"]),
        examples: strings(&["ORD-1234"]),
    };
    let survey = FlowChoice {
        name: "survey".into(),
        title: Some("Satisfaction survey".into()),
        when: strings(&["the user wants to leave feedback"]),
        examples: vec![],
    };
    let request = UnderstandRequest {
        message: "Hi, I'd like to book a hotel room".into(),
        flows: vec![billing, booking_flow(), survey],
        fields: booking_fields(None),
        today: TODAY.into(),
        ..Default::default()
    };
    let understanding = understand(&request);
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    assert_eq!(fields_of(&understanding), json!({}));
}

#[test]
fn booking_one_question_at_a_time() {
    let hotel = booking_turn("The Grand Hotel, please", Some("hotel"));
    assert_eq!(fields_of(&hotel), json!({"hotel": "Grand Hotel"}));
    assert_eq!(hotel.conditions.get("booking.confirm#2").map(|answer| answer.yes), Some(false));

    let date = booking_turn("2026-12-04", Some("date"));
    assert_eq!(fields_of(&date), json!({"date": "2026-12-04"}));
    assert_eq!(date.flow, None);

    let guests = booking_turn("2 guests", Some("guests"));
    assert_eq!(fields_of(&guests), json!({"guests": 2}));

    let yes = booking_turn("yes", Some("confirmed"));
    assert_eq!(fields_of(&yes), json!({"confirmed": true}));
    assert_eq!(yes.conditions.get("booking.confirm#2").map(|answer| answer.yes), Some(false));
}

#[test]
fn booking_in_one_message() {
    let understanding = booking_turn("Book the Grand Hotel for 2 guests on 2026-12-04", None);
    assert_eq!(fields_of(&understanding), json!({"hotel": "Grand Hotel", "date": "2026-12-04", "guests": 2}));
    assert_eq!(understanding.flow.as_deref(), Some("booking"));
    assert_eq!(understanding.conditions.get("booking.confirm#2").map(|answer| answer.yes), Some(false));

    let people = booking_turn("book the Grand Hotel for 2 people on 2026-12-04", None);
    assert_eq!(fields_of(&people), json!({"hotel": "Grand Hotel", "date": "2026-12-04", "guests": 2}));
}

#[test]
fn every_value_and_yes_cites_the_words_it_was_read_from() {
    let understanding = booking_turn("Book the grand hotel for two guests on December 4th", None);
    assert_eq!(evidence_of(&understanding), json!({"hotel": "grand hotel", "date": "December 4th", "guests": "two"}));
    let change = booking_turn("No, make it a different day instead", Some("confirmed"));
    assert_eq!(
        change.conditions.get("booking.confirm#2").and_then(|answer| answer.evidence.as_deref()),
        Some("different")
    );
    // A change is not a no: the confirmation is left unanswered.
    assert_eq!(evidence_of(&change), json!({}));
    let savoy = booking_turn("The Savoy, please", Some("hotel"));
    assert_eq!(evidence_of(&savoy), json!({"hotel": "The Savoy"}));
    let no = booking_turn("no", Some("confirmed"));
    assert_eq!(no.conditions.get("booking.confirm#2"), Some(&crate::llm::Answer::no()));
}

#[test]
fn booking_changing_the_date_at_confirmation() {
    let understanding = booking_turn("actually, can we change the date?", Some("confirmed"));
    assert_eq!(understanding.conditions.get("booking.confirm#2").map(|answer| answer.yes), Some(true));
    assert_eq!(fields_of(&understanding), json!({}));
}

#[test]
fn booking_declining() {
    let understanding = booking_turn("no", Some("confirmed"));
    assert_eq!(fields_of(&understanding), json!({"confirmed": false}));
    assert_eq!(understanding.conditions.get("booking.confirm#2").map(|answer| answer.yes), Some(false));
}

#[test]
fn hotel_not_among_examples_is_the_whole_answer_when_asked() {
    let savoy = booking_turn("The Savoy, please", Some("hotel"));
    assert_eq!(fields_of(&savoy), json!({"hotel": "The Savoy"}));
    // Not asked: nothing to go on.
    assert_eq!(fields_of(&booking_turn("The Savoy, please", Some("date"))), json!({}));
    // An answer to something else is not a hotel name.
    assert_eq!(fields_of(&booking_turn("2026-12-04", Some("hotel"))), json!({"date": "2026-12-04"}));
    assert_eq!(fields_of(&booking_turn("can we change the date?", Some("hotel"))), json!({}));
}

#[test]
fn relative_dates_use_the_request_day() {
    assert_eq!(fields_of(&booking_turn("tomorrow", Some("date"))), json!({"date": "2026-01-06"}));
    assert_eq!(
        fields_of(&booking_turn("next Friday, for three", Some("date"))),
        json!({"date": "2026-01-09", "guests": 3})
    );
}

fn support_fields() -> Vec<FieldSpec> {
    let mut email = field("email", "string");
    email.description = Some("The email address on the customer's account".into());
    email.pattern = Some("^[^@ ]+@[^@ ]+$".into());
    let mut issue = field("issue", "enum");
    issue.values = strings(&["billing", "technical", "account"]);
    let details = field("details", "string");
    let mut order_id = field("order_id", "string");
    order_id.pattern = Some("^ORD-[0-9]{4}$".into());
    order_id.examples = strings(&["ORD-1234"]);
    let refund_reason = field("refund_reason", "string");
    let satisfied = field("satisfied", "bool");
    vec![email, issue, details, order_id, refund_reason, satisfied]
}

fn billing_flow() -> FlowChoice {
    FlowChoice {
        name: "billing".into(),
        title: Some("Billing and refunds".into()),
        when: strings(&["the user has a billing question or wants a refund"]),
        examples: strings(&["ORD-1234"]),
    }
}

/// Support turn: the runtime sends the fields the active step collects
/// (`asked` when it collects one) and the candidate billing flow's
/// `requires` (order_id).
fn support_turn(message: &str, active_flow: &str, collect: &str, conditions: Vec<Question>) -> Understanding {
    let fields = support_fields()
        .into_iter()
        .filter(|field| field.name == collect || field.name == "order_id")
        .map(|mut field| {
            field.asked = field.name == collect;
            field
        })
        .collect();
    let request = UnderstandRequest {
        message: message.into(),
        active_flow: Some(active_flow.into()),
        flows: vec![billing_flow()],
        fields,
        conditions,
        signals: vec![
            Question { id: "wants_human".into(), when: strings(&["the user asks for a human agent or a real person"]) },
            Question {
                id: "frustrated".into(),
                when: strings(&["the user is frustrated or says it still does not work"]),
            },
        ],
        today: TODAY.into(),
        ..Default::default()
    };
    understand(&request)
}

fn triage_conditions() -> Vec<Question> {
    vec![
        Question { id: "triage.ask_issue#2".into(), when: strings(&["the service is down or the problem is urgent"]) },
        Question { id: "triage.ask_issue#3".into(), when: strings(&["the user is angry or upset"]) },
    ]
}

#[test]
fn support_email_by_pattern() {
    let understanding = support_turn("ann@example.com", "triage", "email", vec![]);
    assert_eq!(fields_of(&understanding), json!({"email": "ann@example.com"}));
    assert_eq!(understanding.flow, None);
    assert_eq!(understanding.signals.get("wants_human").map(|answer| answer.yes), Some(false));
    assert_eq!(understanding.signals.get("frustrated").map(|answer| answer.yes), Some(false));
}

#[test]
fn support_issue_billing() {
    let understanding = support_turn("it's about billing", "triage", "issue", triage_conditions());
    assert_eq!(fields_of(&understanding), json!({"issue": "billing"}));
    assert_eq!(understanding.conditions.values().filter(|answer| answer.yes).count(), 0);
}

#[test]
fn support_urgent_technical() {
    let understanding = support_turn("technical: the service is down", "triage", "issue", triage_conditions());
    assert_eq!(fields_of(&understanding), json!({"issue": "technical"}));
    assert_eq!(understanding.conditions.get("triage.ask_issue#2").map(|answer| answer.yes), Some(true));
    assert_eq!(understanding.conditions.get("triage.ask_issue#3").map(|answer| answer.yes), Some(false));
}

#[test]
fn support_upset() {
    let understanding = support_turn("I'm really upset with you", "triage", "issue", triage_conditions());
    assert_eq!(fields_of(&understanding), json!({}));
    assert_eq!(understanding.conditions.get("triage.ask_issue#3").map(|answer| answer.yes), Some(true));
}

#[test]
fn support_refund_routes_to_billing_with_the_order() {
    let understanding = support_turn("I want a refund for ORD-1234", "triage", "email", vec![]);
    assert_eq!(understanding.flow.as_deref(), Some("billing"));
    assert_eq!(fields_of(&understanding), json!({"order_id": "ORD-1234"}));
}

#[test]
fn support_free_text_answers() {
    let details = support_turn("The export button does nothing.", "triage", "details", vec![]);
    assert_eq!(fields_of(&details), json!({"details": "The export button does nothing"}));
    let reason = support_turn("It arrived broken", "billing", "refund_reason", vec![]);
    assert_eq!(fields_of(&reason), json!({"refund_reason": "It arrived broken"}));
}

#[test]
fn support_free_text_is_not_taken_from_a_message_about_something_else() {
    let human = support_turn("Can I talk to a real person", "triage", "details", vec![]);
    assert_eq!(human.signals.get("wants_human").map(|answer| answer.yes), Some(true));
    assert_eq!(fields_of(&human), json!({}));
    let refund = support_turn("I want a refund", "triage", "details", vec![]);
    assert_eq!(refund.flow.as_deref(), Some("billing"));
    assert_eq!(fields_of(&refund), json!({}));
}

#[test]
fn support_survey_answers() {
    assert_eq!(fields_of(&support_turn("yes, thanks", "survey", "satisfied", vec![])), json!({"satisfied": true}));
    let no = support_turn("not really, it still does not work", "survey", "satisfied", vec![]);
    assert_eq!(fields_of(&no), json!({"satisfied": false}));
    assert_eq!(no.signals.get("frustrated").map(|answer| answer.yes), Some(true));
}

#[test]
fn every_question_gets_an_answer_and_one_call_is_counted() {
    let understanding = booking_turn("hello", None);
    assert_eq!(understanding.conditions.len(), 1);
    assert_eq!(understanding.usage.calls, 1);
    assert!(understanding.usage.prompt > 0);
    assert_eq!(understanding.usage.cached, 0);
}

#[test]
fn understanding_is_deterministic() {
    let first = booking_turn("Book the Grand Hotel for 2 guests on 2026-12-04", None);
    let second = booking_turn("Book the Grand Hotel for 2 guests on 2026-12-04", None);
    assert_eq!(first, second);
}

#[test]
fn without_a_valid_today_relative_dates_give_nothing() {
    let request = UnderstandRequest {
        message: "tomorrow".into(),
        fields: booking_fields(Some("date")),
        today: "not a date".into(),
        ..Default::default()
    };
    assert_eq!(fields_of(&understand(&request)), json!({}));
}

/// A tool loop that records whether the provider tried to use it.
struct Watch {
    calls: usize,
}

impl ToolLoop for Watch {
    fn call_tool(&mut self, _name: &str, _arguments: Value) -> Result<Value, String> {
        self.calls += 1;
        Err("no".into())
    }

    fn may_call(&self) -> bool {
        true
    }
}

fn respond(request: &ReplyRequest) -> (Response, Vec<String>, usize) {
    let mut streamed = Vec::new();
    let mut tools = Watch { calls: 0 };
    let result =
        reply_with_tools(&mut Offline::new(), request, &mut tools, &mut |text| streamed.push(text.to_string()));
    assert!(result.is_ok(), "{result:?}");
    (result.unwrap_or_default(), streamed, tools.calls)
}

#[test]
fn reply_is_the_rendered_prompts_then_appended() {
    let request = ReplyRequest {
        instructions: strings(&["Shall I book Grand Hotel on 2026-12-04 for 2 guests?"]),
        appended: strings(&["Mention the spa."]),
        said: strings(&["Welcome!"]),
        message: "Book the Grand Hotel for 2 guests on 2026-12-04".into(),
        ..Default::default()
    };
    let (response, streamed, tool_calls) = respond(&request);
    assert_eq!(response.text, "Shall I book Grand Hotel on 2026-12-04 for 2 guests? Mention the spa.");
    assert_eq!(streamed, vec![response.text.clone()]);
    assert_eq!(tool_calls, 0);
    assert_eq!(response.usage.calls, 1);
    assert_eq!(response.usage.completion, 13);
}

#[test]
fn reply_without_instructions() {
    let (response, streamed, _) = respond(&ReplyRequest::default());
    assert_eq!(response.text, FALLBACK_REPLY);
    assert_eq!(streamed.len(), 1);
    let said = ReplyRequest { said: strings(&["Booked!"]), ..Default::default() };
    assert_eq!(respond(&said).0.text, "");
}

#[test]
fn reply_never_uses_tools_even_when_offered() {
    let request = ReplyRequest { instructions: strings(&["Which hotel?"]), ..Default::default() };
    let mut streamed = String::new();
    let result = reply_with_tools(&mut Offline::new(), &request, &mut NoTools, &mut |text| streamed.push_str(text));
    assert_eq!(result.map(|response| response.text).ok().as_deref(), Some("Which hotel?"));
    assert_eq!(streamed, "Which hotel?");
}

#[test]
fn every_round_is_the_answer() {
    let request = ReplyRequest {
        instructions: strings(&["Which hotel?"]),
        tools: vec![crate::llm::ToolSpec { name: "book".into(), description: None, parameters: json!({}) }],
        ..Default::default()
    };
    let earlier = crate::llm::ToolRound { asked: crate::llm::ToolCalls::default(), results: vec![] };
    for rounds in [vec![], vec![earlier]] {
        let answer = Offline::new().reply(&request, &rounds, &mut |_| {});
        let text = match answer {
            Ok(crate::llm::ModelReply::Done(response)) => response.text,
            other => panic!("an answer expected: {other:?}"),
        };
        assert_eq!(text, "Which hotel?");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Pieces that exercise the rules' edges, glued in any order.
    const PIECES: &[&str] = &[
        "2026-12-04",
        "2026-02-30",
        "2",
        "-",
        ",",
        ".",
        ":",
        "'",
        "\u{2019}",
        "guests",
        "people",
        "yes",
        "no",
        "not",
        "ORD-1234",
        "ORD",
        "1234",
        "Grand",
        "Hotel",
        "grand hotel",
        "tomorrow",
        "friday",
        "December",
        "4th",
        "of",
        "ann@example.com",
        "@",
        "twenty",
        "one",
        "a couple",
        "10",
        "30",
        "pm",
        "T",
        "Z",
        "+",
        "é",
        "İ",
        "billing",
        "change",
        "date",
        "please",
        "?",
        "don't",
        "1,200",
        "2.5",
        "99999999999999999999",
        "the",
        "Ritz Paris",
    ];

    fn message() -> impl Strategy<Value = String> {
        let glued =
            prop::collection::vec((prop::sample::select(PIECES), prop::sample::select(&["", " ", ", "][..])), 0..12)
                .prop_map(|parts| parts.into_iter().map(|(piece, separator)| format!("{piece}{separator}")).collect());
        prop_oneof![glued, "\\PC{0,60}"]
    }

    fn all_fields() -> Vec<FieldSpec> {
        let mut fields = booking_fields(Some("confirmed"));
        fields.extend(support_fields());
        let mut at = field("at", "datetime");
        at.asked = false;
        fields.push(at);
        fields
    }

    fn check_invariants(message: &str, today: &str, asked: usize) -> Result<(), TestCaseError> {
        let mut fields = all_fields();
        for (index, field) in fields.iter_mut().enumerate() {
            field.asked = index == asked;
        }
        let request = UnderstandRequest {
            message: message.into(),
            active_flow: Some("booking".into()),
            flows: vec![booking_flow(), billing_flow()],
            fields: fields.clone(),
            conditions: vec![change_date()],
            today: today.into(),
            ..Default::default()
        };
        let understanding = Offline::new().understand(&request);
        prop_assert!(understanding.is_ok());
        let understanding = understanding.unwrap_or_default();
        prop_assert_eq!(understanding.conditions.len(), 1);
        let lower = message.to_lowercase();
        let said = crate::runtime::grounding::Words::new(message);
        for (name, proposal) in &understanding.fields {
            let spec = fields.iter().find(|field| &field.name == name);
            prop_assert!(spec.is_some(), "unknown field {}", name);
            let Some(spec) = spec else { continue };
            let evidence = proposal.evidence.clone().unwrap_or_default();
            let cited = crate::runtime::grounding::Words::new(&evidence);
            prop_assert!(said.quotes(&cited), "{}: evidence {:?} is not in {:?}", name, evidence, message);
            match (spec.kind.as_str(), &proposal.value) {
                ("string" | "enum", Value::String(text)) => {
                    let declared = spec.examples.contains(text) || spec.values.contains(text);
                    prop_assert!(declared || lower.contains(&text.to_lowercase()), "{} = {:?} invented", name, text);
                    prop_assert!(!text.is_empty());
                }
                ("int", Value::Number(number)) => {
                    let number = number.as_f64().unwrap_or(f64::NAN);
                    prop_assert!(spec.min.is_none_or(|min| number >= min) && spec.max.is_none_or(|max| number <= max));
                }
                ("date", Value::String(text)) => {
                    prop_assert!(NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(), "{}", text);
                }
                ("datetime", Value::String(text)) => prop_assert!(text.len() >= 19, "{}", text),
                ("bool", Value::Bool(_)) => {}
                (kind, value) => prop_assert!(false, "{} of type {} got {:?}", name, kind, value),
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn never_panics_and_never_invents(message in message(), today in prop_oneof![Just("2026-01-05".to_string()), "\\PC{0,12}"], asked in 0usize..12) {
            check_invariants(&message, &today, asked)?;
        }
    }
}

/// The booking request at the hotel step, asking for the fused reply over
/// the steps the runtime would offer.
fn fused_booking_turn(message: &str, active: Option<&str>) -> Understanding {
    let step = |id: &str, missing: &[&str], prompt: &str| crate::llm::StepAsk {
        id: format!("booking.{id}"),
        flow: "booking".into(),
        missing: strings(missing),
        prompt: prompt.into(),
    };
    let request = UnderstandRequest {
        message: message.into(),
        active_flow: active.map(str::to_string),
        flows: if active.is_none() { vec![booking_flow()] } else { vec![] },
        fields: booking_fields(Some("hotel")),
        today: TODAY.into(),
        reply: Some(crate::llm::ReplyAsk {
            data: serde_json::Map::from_iter([("date".to_string(), json!("2026-12-04"))]),
            steps: vec![
                step("ask_hotel", &["hotel"], "Which hotel would you like to book?"),
                step("ask_guests", &["guests"], "How many guests?"),
                step("confirm", &["confirmed"], "Shall I book {{hotel}} on {{date}} for {{guests}} guests?"),
            ],
            ..crate::llm::ReplyAsk::default()
        }),
        ..Default::default()
    };
    understand(&request)
}

#[test]
fn the_fused_reply_is_the_prompt_of_the_first_step_the_message_leaves_missing() {
    let reply = |message: &str, active: Option<&str>| fused_booking_turn(message, active).reply;
    assert_eq!(
        reply("The Grand Hotel, for 2 guests", Some("booking")),
        Some(FusedReply {
            step: "booking.confirm".into(),
            text: "Shall I book Grand Hotel on 2026-12-04 for 2 guests?".into()
        }),
        "the values from the message and the known data, written as the runtime renders them"
    );
    assert_eq!(
        reply("The Grand Hotel, please", Some("booking")),
        Some(FusedReply { step: "booking.ask_guests".into(), text: "How many guests?".into() })
    );
    assert_eq!(
        reply("I'd like to book a hotel room", None).map(|reply| reply.step),
        Some("booking.ask_hotel".into()),
        "routed into the flow"
    );
    assert_eq!(reply("what is the weather like?", None), None, "routed nowhere, and no fallback flow");
    // The reply's words count as completion, like a reply call's.
    let understood = fused_booking_turn("The Grand Hotel, please", Some("booking"));
    assert_eq!(understood.usage.completion, 1 + 3);
}
