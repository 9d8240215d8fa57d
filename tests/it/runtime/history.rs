//! `agent { history { keep_last N  summarize } }` offline: the messages
//! that leave the last `keep_last` are folded into the session's summary,
//! which later requests carry, so the conversation's opening is never cut.

use super::harness::{NOW, program, tool_env_at};
use flowc::llm::offline::Offline;
use flowc::llm::{ModelReply, Provider, ProviderError, ReplyRequest, ToolRound, UnderstandRequest, Understanding};
use flowc::message::Message;
use flowc::runtime::engine::{Runtime, RuntimeOptions};
use flowc::runtime::events::{Event, Purpose};
use std::sync::{Arc, Mutex};

/// The offline model, keeping the history of every understand request it
/// receives (summary calls are reply calls, so none of these is one).
struct Spy {
    inner: Offline,
    understood: Arc<Mutex<Vec<Vec<Message>>>>,
}

impl Provider for Spy {
    fn name(&self) -> String {
        "offline".into()
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        if let Ok(mut understood) = self.understood.lock() {
            understood.push(request.history.clone());
        }
        self.inner.understand(request)
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        self.inner.reply(request, rounds, on_text)
    }
}

const TRIP: &str = r#"
agent Planner {
  identity "You plan trips."
  history {
    keep_last 4
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

#[test]
fn twelve_turns_with_keep_last_4_fold_the_oldest_into_a_summary_every_other_turn() {
    let understood = Arc::new(Mutex::new(Vec::new()));
    let spy = Spy { inner: Offline::new(), understood: Arc::clone(&understood) };
    let options = RuntimeOptions { tool_env: tool_env_at(NOW), tools: Default::default(), limits: Default::default() };
    let mut runtime = Runtime::new(program(TRIP), Box::new(spy), options);
    let mut session = runtime.new_session("long");
    let mut summary_calls = Vec::new();
    for n in 0..12 {
        let message =
            if n == 0 { "I want to plan a trip with my aunt Wilhelmina.".to_string() } else { format!("Turn {n}.") };
        let result = match runtime.run_turn(&mut session, &message) {
            Ok(result) => result,
            Err(error) => panic!("{error}"),
        };
        let calls = result
            .events
            .iter()
            .filter(|event| matches!(event, Event::ModelCalled { purpose: Purpose::Summarize, .. }))
            .count();
        let traced = result.events.iter().filter(|event| matches!(event, Event::HistorySummarized { .. })).count();
        assert_eq!(calls, traced, "each summary is traced, turn {n}");
        summary_calls.push(calls);
    }
    // From the fourth turn on, six messages are past the summary: the two
    // past `keep_last` and two more are folded, so the next turn fits.
    assert_eq!(summary_calls, [0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(summary_calls.iter().sum::<usize>(), 5, "5 summary calls in 12 turns");
    let summary = session.summary.clone().unwrap_or_else(|| panic!("a summary is kept in the session"));
    assert_eq!((session.history.len(), summary.through), (24, 20));

    let understood = understood.lock().unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(understood.len(), 12);
    let last = understood.last().unwrap_or_else(|| panic!("the last turn's request"));
    // The last turn folded: the summary, then the newest half of
    // `keep_last` word for word (the turn before, all four were sent).
    assert_eq!(last.len(), 3, "{last:?}");
    assert_eq!(understood.get(10).map(Vec::len), Some(5));
    let lead = last.first().map(|message| message.text.as_str()).unwrap_or_default();
    assert!(lead.contains("aunt Wilhelmina"), "the first message is in the summary sent on the last turn: {lead}");
    assert!(!last.iter().skip(1).any(|message| message.text.contains("Wilhelmina")));
}

/// The summary calls of each of `turns` turns of TRIP, and the history
/// each understand request carried; with `stored`, every turn is committed
/// to a store and the next one runs on the session loaded back from it.
fn trip(turns: usize, stored: bool) -> (Vec<usize>, Vec<Vec<Message>>, usize) {
    let understood = Arc::new(Mutex::new(Vec::new()));
    let spy = Spy { inner: Offline::new(), understood: Arc::clone(&understood) };
    let options = RuntimeOptions { tool_env: tool_env_at(NOW), tools: Default::default(), limits: Default::default() };
    let ir = program(TRIP);
    let mut runtime = Runtime::new(Arc::clone(&ir), Box::new(spy), options);
    let store = flowc::store::memory::MemoryStore::default();
    let mut session = runtime.new_session("long");
    let mut summary_calls = Vec::new();
    for n in 0..turns {
        let message =
            if n == 0 { "I want to plan a trip with my aunt Wilhelmina.".to_string() } else { format!("Turn {n}.") };
        let before = session.clone();
        let result = runtime.run_turn(&mut session, &message).unwrap_or_else(|error| panic!("{error}"));
        if stored {
            flowc::store::commit_turn(&store, &ir, &before, &mut session).unwrap_or_else(|error| panic!("{error}"));
            session = flowc::store::SessionStore::load(&store, "long")
                .unwrap_or_else(|error| panic!("{error}"))
                .unwrap_or_else(|| panic!("the session is stored"));
        }
        let calls = result
            .events
            .iter()
            .filter(|event| matches!(event, Event::ModelCalled { purpose: Purpose::Summarize, .. }))
            .count();
        summary_calls.push(calls);
    }
    let understood = understood.lock().unwrap_or_else(|error| panic!("{error}")).clone();
    (summary_calls, understood, session.history.len())
}

#[test]
fn a_session_stored_between_turns_is_summarised_and_asked_as_one_kept_whole() {
    // 24 turns, 48 messages: past what a stored session once kept (32),
    // whose cut left the summary standing for messages it never folded.
    let (calls, requests, whole) = trip(24, false);
    let (stored_calls, stored_requests, kept) = trip(24, true);
    assert_eq!(stored_calls, calls, "the same summary calls");
    assert_eq!(stored_requests, requests, "every understand request carried the same history");
    assert_eq!(whole, 48);
    // The stored session holds what the summary has not folded: at most
    // the last `keep_last` (4) and this turn's two, far fewer than 48.
    assert!(kept <= 6, "{kept} messages kept");
    let last = requests.last().unwrap_or_else(|| panic!("the last request"));
    assert!(last.first().is_some_and(|lead| lead.text.contains("Summary of the earlier conversation")), "{last:?}");
}
