//! A long conversation offline whose history outgrows a small window: the
//! window is the real one (`llm::context::Windowed`), around the offline
//! provider, with a spy between them that keeps every request as sent.

use crate::llm::context::summary::{SUMMARY_LEAD, is_summary_request};
use crate::llm::context::{ContextWindow, Windowed};
use crate::llm::offline::Offline;
use crate::llm::{ModelReply, Provider, ProviderError, ReplyRequest, ToolRound, UnderstandRequest, Understanding};
use crate::message::{Message, Role};
use crate::runtime::clock::{FixedClock, SeededIds};
use crate::runtime::engine::{Runtime, RuntimeOptions};
use crate::runtime::events::{Event, Purpose, TurnResult};
use crate::runtime::session::Session;
use crate::runtime::tools::ToolEnv;
use crate::store::SessionStore;
use std::sync::{Arc, Mutex};

/// The histories of the requests the model received, summary calls apart,
/// and the summary calls' own.
#[derive(Default)]
struct Sent {
    histories: Vec<Vec<Message>>,
    summaries: Vec<Vec<Message>>,
    /// The post-phase signals' calls' (also in `histories`): their history
    /// ends with this turn's message and reply.
    post_signals: Vec<Vec<Message>>,
}

struct Spy {
    inner: Offline,
    sent: Arc<Mutex<Sent>>,
}

impl Provider for Spy {
    fn name(&self) -> String {
        "offline".into()
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let mut sent = self.sent.lock().unwrap();
        let exchange = request.history.len().checked_sub(2).and_then(|at| request.history.get(at));
        if exchange.is_some_and(|message| message.role == Role::User && message.text == request.message) {
            sent.post_signals.push(request.history.clone());
        }
        sent.histories.push(request.history.clone());
        drop(sent);
        self.inner.understand(request)
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let mut sent = self.sent.lock().unwrap();
        if is_summary_request(request) {
            sent.summaries.push(request.history.clone());
        } else {
            sent.histories.push(request.history.clone());
        }
        drop(sent);
        self.inner.reply(request, rounds, on_text)
    }
}

/// A step that never gets its date: every turn asks again, and the
/// history grows by the user's message and the question.
const NOTES: &str = r#"
agent Planner {
  identity "You plan trips."
  history {
    keep_last 20
    summarize
  }
}
schema {
  start: date "The first day of the trip"
}
flow plan "Plan a trip" {
  when "the user wants to plan a trip"
  step ask_start {
    prompt "On which day does the trip start?"
    collect start
    max_asks 1000
  }
}
"#;

fn runtime(sent: &Arc<Mutex<Sent>>) -> Runtime {
    // 2,048 tokens with 256 kept for the answer: the prompt and about
    // three of these messages fit.
    runtime_of(sent, NOTES, 2048)
}

fn runtime_of(sent: &Arc<Mutex<Sent>>, source: &str, window: u32) -> Runtime {
    let compilation = crate::pipeline::compile(&crate::source::SourceFile::new("notes.flow", source));
    assert!(!compilation.has_errors(), "{:?}", compilation.diagnostics);
    let spy = Spy { inner: Offline::new(), sent: Arc::clone(sent) };
    let provider = Windowed::new(Box::new(spy), ContextWindow::new(Some(window), Some(256)));
    let clock = Arc::new(FixedClock::parse("2026-01-05T10:00:00Z").unwrap());
    let tool_env = ToolEnv { base_dir: std::path::PathBuf::from("."), clock, ids: Arc::new(SeededIds::new(7)) };
    let options = RuntimeOptions { tool_env, tools: Default::default(), limits: Default::default() };
    Runtime::new(Arc::new(compilation.ir), Box::new(provider), options)
}

/// The `n`th message: long, and naming its number so it can be found.
fn message(n: usize) -> String {
    let first = if n == 0 { "I want to plan a trip. " } else { "" };
    format!(
        "{first}Message number {n}: {}",
        "we keep talking about the mountains and the sea and the food. ".repeat(20)
    )
}

fn summarized(result: &TurnResult) -> Vec<(usize, usize)> {
    result
        .events
        .iter()
        .filter_map(|event| match event {
            Event::HistorySummarized { messages, through } => Some((*messages, *through)),
            _ => None,
        })
        .collect()
}

fn model_calls(result: &TurnResult) -> usize {
    result.events.iter().filter(|event| matches!(event, Event::ModelCalled { .. })).count()
}

fn summary_calls(result: &TurnResult) -> usize {
    result.events.iter().filter(|event| matches!(event, Event::ModelCalled { purpose: Purpose::Summarize, .. })).count()
}

#[test]
fn a_history_that_outgrows_the_window_is_summarised_once_per_trim_and_sent_in_place_of_what_it_replaced() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    let mut runtime = runtime(&sent);
    let mut session = runtime.new_session("long");
    let mut trims = 0;
    for n in 0..12 {
        let result = runtime.run_turn(&mut session, &message(n)).unwrap();
        let folded = summarized(&result);
        assert_eq!(summary_calls(&result), folded.len(), "one summary call per trim, turn {n}");
        // The turn's own calls (understand, and the reply unless the
        // understand call wrote it), and the summaries.
        assert_eq!(result.llm_calls as usize, model_calls(&result), "turn {n}: {:?}", result.events);
        trims += folded.len();
    }
    assert!(trims >= 2, "the history outgrew the window more than once: {trims}");
    let summary = session.summary.clone().expect("a summary is kept in the session");
    assert!(summary.through > 0 && summary.through < session.history.len());
    // The summary reaches the newest message it stands for.
    let newest = session.history.iter().take(summary.through).rev().find(|message| message.role == Role::User);
    let number = newest.and_then(|message| message.text.split(':').next()).expect("a folded user message");
    assert!(summary.text.contains(number), "{number} in {}", summary.text);

    let sent = sent.lock().unwrap();
    assert_eq!(sent.summaries.len(), trims);
    let first = sent.summaries.first().and_then(|history| history.first()).expect("a first summary call");
    assert!(first.text.starts_with("I want to plan a trip."), "the first summary starts from the first message");
    // The summary calls after the first start from the summary so far.
    for history in sent.summaries.iter().skip(1) {
        assert!(history.first().is_some_and(|first| first.text.starts_with(SUMMARY_LEAD)), "{history:?}");
    }
    // Once summarised, every request leads with the summary and carries
    // none of the messages it stands for.
    let last = sent.histories.last().expect("requests were sent");
    assert!(last.first().is_some_and(|first| first.text.starts_with(SUMMARY_LEAD)), "{last:?}");
    // (The user's messages are each unique; the questions repeat.)
    for folded in session.history.iter().take(summary.through).filter(|message| message.role == Role::User) {
        assert!(!last.iter().any(|sent| sent.text == folded.text), "a summarised message was sent again");
    }
}

#[test]
fn a_session_saved_and_loaded_keeps_its_summary_and_sends_it() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    let mut runtime = runtime(&sent);
    let mut session = runtime.new_session("kept");
    for n in 0..8 {
        runtime.run_turn(&mut session, &message(n)).unwrap();
    }
    let summary = session.summary.clone().expect("summarised within eight turns");

    let path = std::env::temp_dir().join(format!("flowc-history-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let store = crate::store::sqlite::SqliteStore::open(&path).unwrap();
    store.save(&session, 0, &session.history).unwrap();
    let mut loaded: Session = store.load("kept").unwrap().expect("stored");
    assert_eq!(loaded.summary.as_ref(), Some(&summary));

    sent.lock().unwrap().histories.clear();
    runtime.run_turn(&mut loaded, &message(8)).unwrap();
    let sent = sent.lock().unwrap();
    let first = sent.histories.first().and_then(|history| history.first()).expect("the loaded session's request");
    assert!(first.text.starts_with(SUMMARY_LEAD), "{first:?}");
    drop(store);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn without_summarize_nothing_is_summarised_and_a_session_has_no_summary() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    let program = NOTES.replace("    summarize\n", "");
    let compilation = crate::pipeline::compile(&crate::source::SourceFile::new("notes.flow", &program));
    let spy = Spy { inner: Offline::new(), sent: Arc::clone(&sent) };
    let provider = Windowed::new(Box::new(spy), ContextWindow::new(Some(2048), Some(256)));
    let clock = Arc::new(FixedClock::parse("2026-01-05T10:00:00Z").unwrap());
    let tool_env = ToolEnv { base_dir: std::path::PathBuf::from("."), clock, ids: Arc::new(SeededIds::new(7)) };
    let options = RuntimeOptions { tool_env, tools: Default::default(), limits: Default::default() };
    let mut runtime = Runtime::new(Arc::new(compilation.ir), Box::new(provider), options);
    let mut session = runtime.new_session("cut");
    for n in 0..8 {
        let result = runtime.run_turn(&mut session, &message(n)).unwrap();
        assert_eq!(summary_calls(&result), 0);
        assert!(summarized(&result).is_empty());
    }
    assert!(session.summary.is_none());
    assert!(sent.lock().unwrap().summaries.is_empty());
    // Old sessions, saved without the key, still load.
    let old = serde_json::to_value(&session).unwrap();
    assert!(old.get("summary").is_none());
    let _: Session = serde_json::from_value(old).unwrap();
}

#[test]
fn history_is_written_the_same_in_both_syntaxes_and_keep_last_must_be_positive() {
    let yaml = r#"
agent:
  identity: You plan trips.
  history:
    keep_last: 20
    summarize: true
schema:
  start:
    type: date
    description: The first day of the trip
flows:
  plan:
    title: Plan a trip
    when: the user wants to plan a trip
    steps:
      - id: ask_start
        prompt: On which day does the trip start?
        collect: [start]
        max_asks: 1000
"#;
    let from_yaml = crate::pipeline::compile(&crate::source::SourceFile::new("notes.yaml", yaml));
    assert!(!from_yaml.has_errors(), "{:?}", from_yaml.diagnostics);
    let from_flow = crate::pipeline::compile(&crate::source::SourceFile::new("notes.flow", NOTES));
    let expected = crate::ir::History { keep_last: 20, summarize: true };
    assert_eq!(from_yaml.ir.agent.history, expected);
    assert_eq!(from_flow.ir.agent.history, expected);

    let zero = NOTES.replace("keep_last 20", "keep_last 0");
    let compiled = crate::pipeline::compile(&crate::source::SourceFile::new("zero.flow", &zero));
    let codes: Vec<&str> = compiled.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
    assert_eq!(codes, ["invalid_value"]);
    let twice = NOTES.replace("    summarize\n", "    summarize\n    summarize\n");
    let compiled = crate::pipeline::compile(&crate::source::SourceFile::new("twice.flow", &twice));
    assert!(compiled.has_errors(), "a history item given twice is refused");
}

#[test]
fn a_summary_folds_what_must_go_and_half_of_the_rest() {
    assert_eq!(super::to_fold(10, 0), 0, "nothing to leave out: no summary");
    assert_eq!(super::to_fold(10, 2), 6);
    assert_eq!(super::to_fold(3, 2), 2, "the newest message stays");
    assert_eq!(super::to_fold(4, 9), 4);
}

#[test]
fn turns_past_the_window_make_far_fewer_summary_calls_than_turns() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    // The window fills after about a dozen turns (`keep_last` is no
    // bound here).
    let mut runtime = runtime_of(&sent, &NOTES.replace("keep_last 20", "keep_last 60"), 4096);
    let mut session = runtime.new_session("many");
    let mut n = 0;
    while session.summary.is_none() {
        let result = runtime.run_turn(&mut session, &message(n)).unwrap();
        n += 1;
        assert!(n < 40, "the window filled: {:?}", result.events);
    }
    let turns = 24;
    let mut calls = 0;
    for _ in 0..turns {
        let result = runtime.run_turn(&mut session, &message(n)).unwrap();
        calls += summary_calls(&result);
        n += 1;
    }
    // Folding only what each request had to leave out made one summary
    // call per turn here (24 in 24); folding half of the rest too, 4.
    assert!(calls >= 2 && calls * 4 <= turns, "{calls} summary calls in {turns} turns past the window");
    // What is kept still reaches the newest messages word for word.
    let sent = sent.lock().unwrap();
    let last = sent.histories.last().expect("requests were sent");
    assert!(last.first().is_some_and(|first| first.text.starts_with(SUMMARY_LEAD)), "{last:?}");
    assert!(last.len() > 4, "half the window's messages are kept: {}", last.len());
}

/// A post-phase signal that opens during every other turn (its guard
/// flips in the step's `prepare`), so it is asked in a call of its own.
const POST_SIGNAL: &str = r#"
signal wrapping_up {
  when "the user wants to stop planning"
  if flip == true
  phase post
}
"#;

#[test]
fn the_post_signals_call_carries_the_summary_and_this_turns_exchange() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    let program = format!(
        "{}{POST_SIGNAL}",
        NOTES
            .replace(
                "  start: date \"The first day of the trip\"",
                "  start: date \"The first day of the trip\"\n  flip: bool"
            )
            .replace("    max_asks 1000", "    max_asks 1000\n    prepare { set flip = flip != true }")
    );
    let mut runtime = runtime_of(&sent, &program, 2048);
    let mut session = runtime.new_session("post");
    for n in 0..10 {
        runtime.run_turn(&mut session, &message(n)).unwrap();
    }
    assert!(session.summary.is_some(), "summarised within ten turns");
    let sent = sent.lock().unwrap();
    assert!(sent.post_signals.len() >= 3, "the signal was asked after the reply: {}", sent.post_signals.len());
    let last = sent.post_signals.last().expect("a post-signals call");
    assert!(last.first().is_some_and(|first| first.text.starts_with(SUMMARY_LEAD)), "{last:?}");
    let ends: Vec<Role> = last.iter().rev().take(2).map(|message| message.role).collect();
    assert_eq!(ends, [Role::Assistant, Role::User], "this turn's message and reply close the history");
}

#[test]
fn messages_older_than_keep_last_are_summarised_not_cut_with_slack() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    // A window that never fills: only `keep_last` leaves messages out.
    let mut runtime = runtime_of(&sent, &NOTES.replace("keep_last 20", "keep_last 4"), 200_000);
    let mut session = runtime.new_session("kept_last");
    let mut calls = Vec::new();
    for n in 0..12 {
        let short = format!("{}Message number {n}.", if n == 0 { "I want to plan a trip. " } else { "" });
        let result = runtime.run_turn(&mut session, &short).unwrap();
        calls.push(summary_calls(&result));
        assert_eq!(summary_calls(&result), summarized(&result).len());
    }
    // Six messages once the third turn starts: the two past `keep_last`
    // and half of the four that would be sent are folded (four), and the
    // next turn fits again; so a summary call every other turn.
    assert_eq!(calls, [0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
    let summary = session.summary.clone().expect("a summary is kept in the session");
    assert_eq!(summary.through, 20);
    let sent = sent.lock().unwrap();
    // Every folded message went to a summary call, each call at most
    // `keep_last` messages after the summary so far.
    let folded: Vec<usize> = sent.summaries.iter().map(|history| history.len()).collect();
    assert_eq!(folded, [4, 5, 5, 5, 5]);
    let last = sent.histories.last().expect("requests were sent");
    let lead = last.first().expect("the summary leads the last request");
    assert!(lead.text.starts_with(SUMMARY_LEAD) && lead.text.contains("I want to plan a trip."), "{lead:?}");
    assert!(last.len() <= 5, "the summary and at most `keep_last` messages: {last:?}");
}

#[test]
fn a_history_saved_without_summarize_is_folded_a_bounded_part_per_turn() {
    let sent = Arc::new(Mutex::new(Sent::default()));
    let mut runtime =
        runtime_of(&sent, &NOTES.replace("keep_last 20", "keep_last 4").replace("    summarize\n", ""), 200_000);
    let mut session = runtime.new_session("old");
    for n in 0..6 {
        runtime.run_turn(&mut session, &format!("Message number {n}.")).unwrap();
    }
    assert!(session.summary.is_none() && session.history.len() == 12);
    let mut runtime = runtime_of(&sent, &NOTES.replace("keep_last 20", "keep_last 4"), 200_000);
    // The same session, as if the program had been edited to add `summarize`
    // (and the session migrated).
    session.program_hash = runtime.new_session("new").program_hash;
    let mut folded = Vec::new();
    for n in 6..9 {
        let result = runtime.run_turn(&mut session, &format!("Message number {n}.")).unwrap();
        folded.extend(summarized(&result));
    }
    // Twelve messages, eight past `keep_last`: four a call (the first turn
    // folds before its understand and its reply calls), until what is
    // left fits again; none is cut.
    assert_eq!(folded, [(4, 4), (4, 8), (4, 12)]);
    let sent = sent.lock().unwrap();
    let summary = sent.summaries.last().and_then(|history| history.first()).unwrap();
    assert!(summary.text.contains("Message number 0."), "{summary:?}");
}
