//! The claims check on real cases: the order number a small model made up
//! on the support desk, a date the user gave in another format, a booking
//! id from a tool result, and the texts of the program itself.

use super::*;
use crate::llm::{ToolCall, ToolCalls};
use crate::message::{Message, Role};
use crate::source::SourceFile;
use reading::Claim;
use serde_json::json;

const SUPPORT: &str = r#"
agent Helpdesk {
  identity "You are the support assistant of Acme Cloud."
  rule "Be brief and friendly."
  rule "Urgent? Call 555-0100."
}
schema {
  email: string
  order_id: string "Order number" examples "ORD-1234"
}
flow billing "Billing and refunds" {
  when "the user has a billing question or wants a refund"
  step ask_email { prompt "What is the email address on your account?" collect email }
  step ask_order { prompt "What is the order number (like ORD-1234)?" collect order_id }
}
"#;

fn program(source: &str) -> ProgramTexts {
    let compilation = crate::pipeline::compile(&SourceFile::new("test.flow", source));
    assert!(!compilation.has_errors(), "{:#?}", compilation.diagnostics);
    ProgramTexts::new(Arc::new(compilation.ir))
}

fn today() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 1, 5).unwrap()
}

/// A session whose user said `said`, one message after the other.
fn session(said: &[&str]) -> Session {
    let mut session = Session::new("s", "h");
    for text in said {
        session.history.push(Message { role: Role::User, text: text.to_string() });
        session.history.push(Message { role: Role::Assistant, text: "Noted.".into() });
    }
    session
}

/// What `reply` states that nothing backs, in a turn at a step whose
/// prompt is `prompt`, the user having said `said` and now `message`.
fn unfounded(program: &ProgramTexts, said: &[&str], message: &str, prompt: &str, reply: &str) -> Option<String> {
    let session = session(said);
    let request = ReplyRequest { instructions: vec![prompt.to_string()], ..ReplyRequest::default() };
    let mut grounds = Grounds::of(program, today());
    grounds.session(&session, message);
    grounds.request(&request, &[]);
    grounds.unfounded(reply)
}

#[test]
fn an_order_number_nobody_gave_is_a_claim() {
    // SmolLM2 on the support desk: "I was charged twice" answered with a
    // ticket number it made up.
    let support = program(SUPPORT);
    let said = ["Hi, I need help", "ann@example.com"];
    let prompt = "What is the order number (like ORD-1234)?";
    let reply = "I'm sorry! I've opened ticket BILLING-1234 for you. What is the order number (like ORD-1234)?";
    let found = unfounded(&support, &said, "I was charged twice", prompt, reply);
    assert_eq!(found.as_deref(), Some("BILLING-1234"));
    assert_eq!(reason("BILLING-1234"), "the reply states \"BILLING-1234\", which appears nowhere the model was given");
    // The prompt's own example, the user's email and the program's phone
    // number are no inventions.
    let truthful = "Thanks, ann@example.com. Your order number, like ORD-1234? Urgent: 555-0100.";
    assert_eq!(unfounded(&support, &said, "I was charged twice", prompt, truthful), None);
    // An email the user did not give is one.
    let other = unfounded(&support, &said, "I was charged twice", prompt, "I'll write to bob@example.com.");
    assert_eq!(other.as_deref(), Some("bob@example.com"));
}

#[test]
fn a_date_the_user_gave_in_another_format_is_no_claim() {
    let support = program(SUPPORT);
    let prompt = "How many guests?";
    for reply in ["December 4th, lovely. How many guests?", "Noted: 04/12/2026. How many guests?", "For 12/04, then?"] {
        assert_eq!(unfounded(&support, &["Book the Grand Hotel"], "2026-12-04", prompt, reply), None, "{reply}");
    }
    // "tomorrow" is a date the user gave too.
    let tomorrow = unfounded(&support, &[], "tomorrow please", prompt, "So January 6. How many guests?");
    assert_eq!(tomorrow, None);
    let found = unfounded(&support, &["Book the Grand Hotel"], "2026-12-04", prompt, "December 5th. How many guests?");
    assert_eq!(found.as_deref(), Some("December 5th"));
    // A number in words backs it in digits.
    assert_eq!(unfounded(&support, &[], "for two guests", prompt, "2 guests, noted."), None);
    assert_eq!(unfounded(&support, &[], "for two guests", prompt, "3 guests, noted.").as_deref(), Some("3"));
    // Today (2026-01-05) is given as a date and a year, not as the numbers
    // 1 and 5.
    assert_eq!(unfounded(&support, &[], "for two guests", prompt, "Today, January 5th, 2026?"), None);
    assert_eq!(unfounded(&support, &[], "for two guests", prompt, "5 guests, noted.").as_deref(), Some("5"));
}

#[test]
fn what_the_user_said_turns_ago_backs_a_reply_read_after_the_turns_own_texts() {
    let support = program(SUPPORT);
    let prompt = "How many guests?";
    let said = ["My order is ORD-5521", "ann@example.com"];
    // Each claim backed where it was given: the order and the email in
    // the conversation, the date in the message, the 2 nowhere.
    let reply = "ORD-5521 for ann@example.com on 2026-12-04. How many guests?";
    assert_eq!(unfounded(&support, &said, "on 2026-12-04", prompt, reply), None);
    let reply = "ORD-5521 on 2026-12-04 for 2. How many guests?";
    assert_eq!(unfounded(&support, &said, "on 2026-12-04", prompt, reply).as_deref(), Some("2"));
    assert_eq!(unfounded(&support, &[], "on 2026-12-04", prompt, "ORD-5521?").as_deref(), Some("ORD-5521"));
}

#[test]
fn a_booking_id_from_a_tool_result_is_no_claim() {
    let support = program(SUPPORT);
    let session = session(&["Book the Grand Hotel on 2026-12-04 for 2 guests"]);
    let request = ReplyRequest { instructions: vec!["Book the room.".into()], ..ReplyRequest::default() };
    let call = ToolCall { id: "1".into(), name: "book_hotel".into(), arguments: Ok(json!({"hotel": "Grand Hotel"})) };
    let rounds = [ToolRound {
        asked: ToolCalls { calls: vec![call], ..ToolCalls::default() },
        results: vec![Ok(json!({"booking_id": "GH-28745CD2"}))],
    }];
    let reply = "Booked! Your confirmation number is GH-28745CD2.";
    let mut grounds = Grounds::of(&support, today());
    grounds.session(&session, "yes");
    grounds.request(&request, &rounds);
    assert_eq!(grounds.unfounded(reply), None);
    // Without the tool's result, the same id is made up.
    let mut grounds = Grounds::of(&support, today());
    grounds.session(&session, "yes");
    grounds.request(&request, &[]);
    assert_eq!(grounds.unfounded(reply).as_deref(), Some("GH-28745CD2"));
}

#[test]
fn the_data_and_the_fused_calls_prompts_are_given_too() {
    let support = program(SUPPORT);
    let mut session = session(&[]);
    session.data.insert("order_id".into(), json!("ORD-7781"));
    let ask = ReplyAsk {
        identity: None,
        rules: vec![],
        data: serde_json::Map::new(),
        fallback_flow: None,
        steps: vec![crate::llm::StepAsk {
            id: "billing.ask_reason".into(),
            flow: "billing".into(),
            missing: vec![],
            prompt: "Why a refund for {{order_id}} within 30 days?".into(),
        }],
    };
    let mut grounds = Grounds::of(&support, today());
    grounds.session(&session, "a refund please");
    grounds.ask(&ask);
    assert_eq!(grounds.unfounded("Why a refund for ORD-7781, within 30 days?"), None);
    assert_eq!(grounds.unfounded("Refunds take 14 days.").as_deref(), Some("14"));
}

#[test]
fn a_streamed_reply_stops_at_the_claim_nobody_backs() {
    let support = program(SUPPORT);
    let session = session(&[]);
    let mut grounds = Grounds::of(&support, today());
    grounds.session(&session, "I was charged twice");
    let mut gate = Gate::new();
    let mut shown = String::new();
    for piece in ["I've opened", " ticket BIL", "LING-1234 for", " you."] {
        shown.push_str(&gate.push(piece, &grounds));
    }
    shown.push_str(&gate.finish(&grounds));
    assert_eq!(shown, "I've opened ticket ");
    assert_eq!(gate.blocked(), Some("BILLING-1234"));
    // A reply that states nothing new is shown whole, a word at a time.
    let mut gate = Gate::new();
    assert_eq!(gate.push("What is the order", &grounds), "What is the ");
    assert_eq!(gate.push(" number (like ORD-1234)?", &grounds), "order number (like ");
    assert_eq!(gate.finish(&grounds), "ORD-1234)?");
    assert_eq!(gate.blocked(), None);
}

#[test]
fn a_reply_asked_again_is_shown_only_whole_and_only_if_it_states_nothing_new() {
    let support = program(SUPPORT);
    let session = session(&[]);
    let mut grounds = Grounds::of(&support, today());
    grounds.session(&session, "I was charged twice");
    let mut gate = Gate::whole();
    assert_eq!(gate.push("What is the order ", &grounds), "");
    assert_eq!(gate.finish(&grounds), "What is the order ");
    let mut gate = Gate::whole();
    assert_eq!(gate.push("Ticket BILLING-1234. What is the order?", &grounds), "");
    assert_eq!(gate.finish(&grounds), "");
    assert_eq!(gate.blocked(), Some("BILLING-1234"));
}

#[test]
fn the_programs_texts_are_read_once_a_day() {
    let support = program(SUPPORT);
    let first = support.known(today());
    assert!(Arc::ptr_eq(&first, &support.known(today())), "read again the same day");
    assert!(first.backs(&Claim::Code("5550100".into())), "the rule's phone number");
    let next_day = support.known(today().succ_opt().unwrap());
    assert!(!Arc::ptr_eq(&first, &next_day), "a new day reads them again");
}

#[test]
fn a_program_set_in_place_of_the_runtimes_has_its_own_texts_read() {
    use crate::runtime::clock::{FixedClock, SeededIds};
    use crate::runtime::engine::services::Services;
    use crate::runtime::engine::{Runtime, RuntimeOptions};
    use crate::runtime::tools::ToolEnv;
    let compile = |source: &str| Arc::new(crate::pipeline::compile(&SourceFile::new("test.flow", source)).ir);
    let clock = Arc::new(FixedClock::parse("2026-01-05T10:00:00Z").unwrap());
    let tool_env = ToolEnv { base_dir: std::path::PathBuf::from("."), clock, ids: Arc::new(SeededIds::new(7)) };
    let options = RuntimeOptions { tool_env, tools: Default::default(), limits: Default::default() };
    let mut runtime = Runtime::new(compile(SUPPORT), Box::new(crate::llm::offline::Offline::new()), options);
    let phone = Claim::Code("5550199".into());
    let (sv, _) = Services::borrow(&mut runtime);
    assert!(!sv.claims_setting().0.known(today()).backs(&phone));
    runtime.program = compile(&SUPPORT.replace("555-0100", "555-0199"));
    let (sv, _) = Services::borrow(&mut runtime);
    assert!(sv.claims_setting().0.known(today()).backs(&phone), "the new program's rule");
}
