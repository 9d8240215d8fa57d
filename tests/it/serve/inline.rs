//! Turns that only compute run on the server's async workers: with the
//! booking tool answered by a handler in process, a turn and a session's
//! creation never touch the blocking pool, and the conversation answers
//! exactly as `flowc run --json` does.

use super::{Client, options, start};
use crate::support::{flowc_in, root, stdout};
use flowc::ir::Tool;
use flowc::runtime::tools::{ToolEnv, ToolError, ToolHandler, call_implementation};
use flowc::serve::auth::Auth;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

/// The booking tool's own implementation, called from a handler in
/// process (so the version counts as computing only), counting its calls.
struct Delegate(Arc<AtomicUsize>);

impl ToolHandler for Delegate {
    fn call(&self, tool: &Tool, args: &Map<String, Value>, env: &ToolEnv) -> Result<Value, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        call_implementation(tool, args, env)
    }
}

#[test]
fn a_computed_turn_on_the_worker_answers_as_the_cli_does() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut options = options(Auth::default());
    options.settings.tools.register("book_hotel", Arc::new(Delegate(Arc::clone(&calls))));
    let server = start(&options);
    let client = Client::new(server.addr, None);
    let id = client.new_session();
    let (status, first) = client.say(&id, BOOK);
    assert_eq!(status, 200, "{first}");
    let (status, second) = client.say(&id, "yes");
    assert_eq!(status, 200, "{second}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the handler booked once");

    let cli = flowc_in(root(), &["run", "flows/booking.flow", "--json"], Some(&format!("{BOOK}\nyes\n")));
    let lines: Vec<Value> = stdout(&cli).lines().map(|line| serde_json::from_str(line).expect("a JSON turn")).collect();
    assert_eq!(lines, vec![first, second], "the worker's turns are the CLI's");
    let (status, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!(status, 200, "{shown}");
    assert_eq!((shown["turns"].as_u64(), shown["version"].as_u64()), (Some(2), Some(3)), "{shown}");
}
