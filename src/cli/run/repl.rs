//! The terminal REPL: line editing and history, replies streamed as the
//! model writes them, and the slash commands (`/data`, `/trace`, `/graph`,
//! `/reset`, `/save`, `/load`, `/quit`).

use super::RunError;
use super::conversation::Conversation;
use crate::cli::Outcome;
use crate::runtime::events::TurnResult;
use crate::runtime::limits_config::OPERATOR_STOP_REASONS;
use crate::runtime::session::{Session, adopt};
use std::io::Write;
use std::sync::Arc;

impl Conversation<'_> {
    pub(super) fn repl(&mut self) -> Result<Outcome, RunError> {
        let mut editor = rustyline::DefaultEditor::new().map_err(|error| RunError::Usage(error.to_string()))?;
        let program = Arc::clone(&self.runtime.program);
        let name = program.agent.name.clone().unwrap_or_else(|| "flowc".to_string());
        eprintln!(
            "{name} — talking to the {} model. /help for commands, Ctrl-D to quit.",
            self.runtime.provider_name()
        );
        let streamed = self.stream_to_stdout();
        let take_streamed = || streamed.lock().map(|mut text| std::mem::take(&mut *text)).unwrap_or_default();
        loop {
            match editor.readline("you> ") {
                Ok(line) => {
                    let line = line.trim().to_string();
                    if line.is_empty() {
                        continue;
                    }
                    let _ = editor.add_history_entry(line.as_str());
                    if line.starts_with('/') {
                        if self.command(&line) {
                            return Ok(Outcome::Success);
                        }
                        continue;
                    }
                    take_streamed();
                    let outcome = self.turn(&line);
                    let shown = take_streamed();
                    self.show_turn(outcome, &shown);
                }
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(rustyline::error::ReadlineError::Eof) => return Ok(Outcome::Success),
                Err(error) => return Err(RunError::Usage(format!("cannot read the terminal: {error}"))),
            }
        }
    }

    /// Prints replies as the model writes them. What was printed is kept in
    /// the returned buffer so that the end of the turn prints only what is
    /// missing.
    fn stream_to_stdout(&mut self) -> Arc<std::sync::Mutex<String>> {
        let streamed = Arc::new(std::sync::Mutex::new(String::new()));
        let sink = Arc::clone(&streamed);
        self.runtime.set_stream(Box::new(move |chunk: &str| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(chunk.as_bytes());
            let _ = out.flush();
            if let Ok(mut text) = sink.lock() {
                text.push_str(chunk);
            }
        }));
        streamed
    }

    /// Ends a turn on the terminal, `shown` being what was streamed of it:
    /// the rest of the reply and the trace line, or the error.
    fn show_turn(&mut self, outcome: Result<TurnResult, String>, shown: &str) {
        match outcome {
            Ok(result) => {
                print!("{}", after_stream(shown, &result.reply));
                let _ = std::io::stdout().flush();
                self.dim_line(&result.trace_line());
                // The operator's limits stop a turn before its reply: say
                // why, or the person sees an empty answer and a bare name.
                let reason = result.stopped_reason;
                if OPERATOR_STOP_REASONS.contains(&reason) {
                    self.dim_line(&format!(
                        "note: {}: {} ([limits] in flowc.toml, or its flag)",
                        reason.as_str(),
                        reason.explanation()
                    ));
                }
                self.last = Some(result);
            }
            Err(error) => {
                if !shown.is_empty() {
                    println!();
                }
                eprintln!("error: {error} (the session is unchanged)");
            }
        }
    }

    /// A line of the trace on stderr, dim when colours are on.
    fn dim_line(&self, text: &str) {
        if self.color {
            eprintln!("\x1b[2m{text}\x1b[0m");
        } else {
            eprintln!("{text}");
        }
    }

    /// A slash command; returns whether to quit.
    pub(super) fn command(&mut self, line: &str) -> bool {
        let mut parts = line.splitn(2, ' ');
        let command = parts.next().unwrap_or_default();
        let argument = parts.next().map(str::trim).unwrap_or_default();
        // An export names its position, so an edited program can load it.
        self.session.record_position(&self.runtime.program);
        match command {
            "/quit" | "/exit" => return true,
            "/help" => eprintln!(
                "/data          the collected data\n\
                 /trace         the last turn's directives and events\n\
                 /graph         where the conversation stands, as Mermaid\n\
                 /reset         start a new conversation\n\
                 /save FILE     save the session as JSON\n\
                 /load FILE     load a session saved with /save\n\
                 /quit          leave (or Ctrl-D)"
            ),
            "/data" => {
                let data = crate::runtime::session::ordered_data(&self.runtime.program, &self.session.data);
                println!("{}", serde_json::to_string_pretty(&data).unwrap_or_default());
            }
            "/trace" => match &self.last {
                Some(result) => {
                    let trace = serde_json::json!({ "directives": result.directives, "events": result.events });
                    println!("{}", serde_json::to_string_pretty(&trace).unwrap_or_default());
                }
                None => eprintln!("no turn yet"),
            },
            "/graph" => print!("{}", self.graph()),
            "/reset" => self.reset(),
            "/save" if !argument.is_empty() => self.save(argument),
            "/load" if !argument.is_empty() => self.load(argument),
            "/save" | "/load" => eprintln!("usage: {command} FILE"),
            other => eprintln!("unknown command {other}; /help lists them"),
        }
        false
    }

    /// The program's graph as Mermaid, the current step marked.
    pub(super) fn graph(&self) -> String {
        let program = &self.runtime.program;
        let reachability = crate::check::reachability::analyze(program);
        let mut text = crate::graph::mermaid::render(&crate::graph::build(program, &reachability, self.session.flow));
        if let (Some(flow), Some(step)) = (self.session.flow, self.session.step) {
            crate::graph::mermaid::mark_current(&mut text, flow, step);
        }
        text
    }

    /// Starts over under the same id, version and context.
    fn reset(&mut self) {
        let id = self.session.id.clone();
        let version = self.session.version;
        let context = self.session.context.clone();
        *self.session = self.runtime.new_session(id);
        self.session.version = version;
        self.session.context = context;
        self.last = None;
        eprintln!("started over");
    }

    fn save(&self, path: &str) {
        match serde_json::to_string_pretty(&*self.session) {
            Ok(text) => match std::fs::write(path, text) {
                Ok(()) => eprintln!("saved to {path}"),
                Err(error) => eprintln!("error: cannot write {path}: {error}"),
            },
            Err(error) => eprintln!("error: {error}"),
        }
    }

    fn load(&mut self, path: &str) {
        let loaded = std::fs::read_to_string(path)
            .map_err(|error| error.to_string())
            .and_then(|text| serde_json::from_str::<Session>(&text).map_err(|error| error.to_string()));
        let mut loaded = match loaded {
            Ok(loaded) => loaded,
            Err(error) => {
                eprintln!("error: cannot load {path}: {error}");
                return;
            }
        };
        let hash = self.runtime.program_hash().to_string();
        if let Err(error) = adopt(&self.runtime.program, &hash, &mut loaded) {
            eprintln!("error: cannot load {path}: {error}");
            return;
        }
        // The file is an export: the conversation goes on under this
        // session's id and version.
        loaded.id = self.session.id.clone();
        loaded.version = self.session.version;
        *self.session = loaded;
        eprintln!("loaded {path}");
    }
}

/// What the REPL prints when a turn ends, after `streamed` was shown as
/// the reply was written: the rest of the reply (normally just the line
/// break), or, when the reply turned out different (a post-model `reply`
/// directive replaced the model's text), the reply on a line of its own.
/// A reply the runtime replaced while streaming (a stand-in for a reply
/// set aside) was streamed itself, on its own line after what was shown of
/// the one set aside: it is not printed again.
fn after_stream(streamed: &str, reply: &str) -> String {
    if streamed.is_empty() {
        return format!("{reply}\n");
    }
    if let Some(rest) = reply.strip_prefix(streamed) {
        return format!("{rest}\n");
    }
    if streamed_on_its_own_line(streamed, reply) {
        return "\n".to_string();
    }
    format!("\n{reply}\n")
}

/// Whether `streamed` is the reply's opening lines (its `say` texts, if
/// any), then something else, then the rest of the reply on a line of its
/// own: a stand-in streamed after what it replaced.
fn streamed_on_its_own_line(streamed: &str, reply: &str) -> bool {
    let mut line_starts = std::iter::once(0).chain(reply.match_indices('\n').map(|(at, _)| at + 1));
    line_starts.any(|at| {
        let (Some(opening), Some(rest)) = (reply.get(..at), reply.get(at..)) else {
            return false;
        };
        let Some(after) = streamed.strip_prefix(opening) else {
            return false;
        };
        !rest.is_empty() && after.strip_suffix(rest).is_some_and(|before| before.ends_with('\n'))
    })
}

#[cfg(test)]
mod tests {
    use super::after_stream;

    #[test]
    fn a_streamed_reply_is_not_printed_twice() {
        assert_eq!(after_stream("", "Booked!"), "Booked!\n", "nothing streamed: the whole reply");
        assert_eq!(after_stream("For which date?", "For which date?"), "\n");
        assert_eq!(after_stream("Welcome!", "Welcome!\nFor which date?"), "\nFor which date?\n");
        assert_eq!(after_stream("Let me check", "Sorry, no rooms."), "\nSorry, no rooms.\n");
    }

    #[test]
    fn a_stand_in_streamed_after_what_it_replaced_is_printed_once() {
        // The model's reply shown up to a made-up ticket, then the stand-in
        // the runtime streamed on a line of its own.
        let shown = "I've opened ticket \nWhat is the order number?";
        assert_eq!(after_stream(shown, "What is the order number?"), "\n");
        // With a `say` text before the model's reply, which the reply keeps.
        let shown = "Welcome!\nWhat is the date 2026-\nWhat is the order number?";
        assert_eq!(after_stream(shown, "Welcome!\nWhat is the order number?"), "\n");
        // A reply that only ends like what was shown, not on its own line, is
        // printed whole.
        assert_eq!(after_stream("Let me check the order?", "the order?"), "\nthe order?\n");
    }
}
