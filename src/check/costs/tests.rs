use super::{Calls, Start, TurnCost, costs};
use crate::check::check_findings;
use crate::check::tests::compiled;

fn calls(best: u32, worst: u32) -> Calls {
    Calls { best, worst }
}

fn row<'a>(rows: &'a [TurnCost], flow: &str, start: Option<&str>) -> &'a TurnCost {
    rows.iter()
        .find(|row| {
            row.flow == flow
                && match (&row.start, start) {
                    (Start::Step(step), Some(wanted)) => step == wanted,
                    (Start::Entry, None) => true,
                    _ => false,
                }
        })
        .unwrap_or_else(|| panic!("no row {flow} {start:?}"))
}

const CHAIN: &str = r#"
agent A {
  identity "A test."
  limits {
    max_tool_rounds 3
  }
}

schema {
  name: string "A name"
  ok: bool "Whether it is fine"
}

tool lookup(name: string) -> { found: bool } {
  exec "true"
}

flow f "F" {
  when "the user wants f"
  step ask_name {
    prompt "Name?"
    collect name
  }
  step confirm {
    prompt "Shall I go on, {{name}}?"
    collect ok
    tools lookup
  }
  step done {
    say "Done."
  }
}
"#;

#[test]
fn a_collect_chain_costs_an_understand_and_a_reply_and_a_said_ending_no_reply() {
    let (_, program) = compiled(CHAIN);
    let rows = costs(&program);
    assert_eq!(rows.len(), 3, "the entry and the two steps that ask");

    // Entered from no flow: routing is asked; the turn stops at
    // `ask_name` or, the name given, at `confirm`, which a yes can never
    // pass on the turn that enters it (consent is not carried over). At
    // `ask_name` the understand call may have written the reply (the
    // fused call: one call in all); at `confirm`, with its tools, the
    // reply is a call of its own with up to 3 tool rounds.
    let entry = row(&rows, "f", None);
    assert!(entry.fused);
    assert_eq!(entry.understand, calls(1, 2));
    assert_eq!(entry.reply, calls(0, 4));
    assert_eq!(entry.calls, calls(1, 6));

    // Answering `ask_name`: a free-text name needs the model; the turn
    // stops at `confirm` (one reply, with tool rounds) or asks again.
    // The only step the plan could predict is `ask_name` itself, which
    // is not offered: no fused reply.
    let ask_name = row(&rows, "f", Some("ask_name"));
    assert!(!ask_name.fused);
    assert_eq!(ask_name.understand, calls(1, 2));
    assert_eq!(ask_name.reply, calls(1, 4));

    // Answering `confirm` alone with a yes/no: code may read it, and the
    // `say` ending needs no reply.
    let confirm = row(&rows, "f", Some("confirm"));
    assert_eq!(confirm.understand, calls(0, 2));
    assert_eq!(confirm.reply, calls(0, 4));
    assert_eq!(confirm.post_signals, calls(0, 0));
    assert!(confirm.understand_tokens > 0 && confirm.reply_tokens > 0);
    assert_eq!(
        confirm.worst_tokens,
        confirm.understand_tokens * 2 + confirm.reply_tokens * 4,
        "each call of the worst case sends its prompt"
    );
}

#[test]
fn a_turn_that_only_says_makes_no_reply_and_a_prompt_makes_the_reply_dearer() {
    let short = r#"
schema {
  n: int "A number"
}
flow f {
  step ask {
    prompt "A number?"
    collect n
  }
  step done {
    say "Thanks."
  }
}
"#;
    let (_, program) = compiled(short);
    let rows = costs(&program);
    let ask = row(&rows, "f", Some("ask"));
    // The number asked alone may be read by code; the ending after it
    // says its text; or the step asks again, with the model's reply.
    assert_eq!(ask.understand, calls(0, 2));
    assert_eq!(ask.reply, calls(0, 1));

    let longer = short.replace("A number?", &"Which number would you like, and why that one? ".repeat(20));
    let (_, program) = compiled(&longer);
    let dearer = costs(&program);
    assert!(row(&dearer, "f", Some("ask")).reply_tokens > ask.reply_tokens + 200);
}

#[test]
fn signals_and_conditions_need_the_understand_call_and_guarded_ones_only_at_worst() {
    let source = r#"
schema {
  n: int "A number"
}
signal upset {
  when "the user is upset"
  then {
    reply "Sorry."
  }
}
signal late {
  when "the user says it is late"
  if n > 3
  phase post
}
flow f {
  step ask {
    prompt "A number?"
    collect n
    branch {
      when "the user wants to stop" -> { abort }
    }
  }
}
"#;
    let (_, program) = compiled(source);
    let rows = costs(&program);
    let ask = row(&rows, "f", Some("ask"));
    assert_eq!(ask.understand, calls(1, 2), "the signal and the condition are always asked");
    assert_eq!(ask.post_signals, calls(0, 2), "`late` may open only after the steps acted");
}

#[test]
fn a_turn_over_the_token_budget_is_warned_about_on_its_step() {
    let source = r#"
agent A {
  identity "A test."
  limits {
    max_turn_tokens 100
  }
}
schema {
  n: int "A number"
}
flow f {
  when "the user wants f"
  step ask {
    prompt "A number?"
    collect n
  }
}
"#;
    check_findings(source, &[("turn_token_budget", "f"), ("turn_token_budget", "ask")]);
    let roomy = source.replace("max_turn_tokens 100", "max_turn_tokens 100000");
    check_findings(&roomy, &[]);
}

#[test]
fn a_collect_chain_may_take_one_call_a_turn_with_the_fused_reply() {
    let (_, program) = compiled(
        r#"
schema {
  hotel: string "Name of the hotel"
  guests: int "Number of guests"
  note: string "Anything else"
}
flow booking {
  when "the user wants to book a hotel room"
  step ask_hotel {
    prompt "Which hotel?"
    collect hotel
  }
  step ask_guests {
    prompt "How many guests at {{hotel}}?"
    collect guests
  }
  step ask_note {
    prompt "Anything else?"
    collect note
  }
}
"#,
    );
    let rows = costs(&program);
    // The understand call offers the later steps' prompts, and a turn that
    // stops at one of them makes no reply call.
    let hotel = row(&rows, "booking", Some("ask_hotel"));
    assert!(hotel.fused);
    assert_eq!(hotel.calls, calls(1, 3));
    let without = costs(&compiled(&CHAIN.replace("tools lookup", "")).1);
    assert!(row(&without, "f", Some("ask_name")).fused, "a chain of two steps that ask");
    // The last step has nothing after it to predict.
    let note = row(&rows, "booking", Some("ask_note"));
    assert!(!note.fused);
    assert_eq!(note.reply, calls(1, 1), "the flow completes with nothing said, or it asks again: the model replies");
}

#[test]
fn a_workflow_has_one_row_its_run_without_model_calls_unless_it_asks_the_model() {
    let (_, program) = compiled(
        r#"
schema {
  n: int "A number"
}
flow w {
  requires n
  auto step one {
    say "one"
  }
}
"#,
    );
    let rows = costs(&program);
    let [run] = rows.as_slice() else { panic!("one row: {rows:?}") };
    assert_eq!(run.start, Start::Run);
    assert_eq!(run.calls, calls(0, 0));
}

#[test]
fn model_steps_count_a_call_and_its_repair_and_one_in_a_loop_is_per_item() {
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/flows/outreach.flow")).unwrap();
    let (_, program) = compiled(&source);
    let rows = costs(&program);
    let [run] = rows.as_slice() else { panic!("one workflow run: {rows:?}") };
    assert_eq!(run.start, Start::Run);
    // choose_tone, draft_and_send (in its for_each) and summarise.
    assert_eq!(run.model_steps, calls(0, 6));
    assert!(run.in_loops);
    assert_eq!(run.calls, calls(0, 6));
}

#[test]
fn a_conversation_turn_counts_the_model_steps_of_its_auto_steps_and_flow_hooks_with_their_tokens() {
    let with_steps = "schema {\n  name: string\n  greeting: string\n  mood: enum(calm, upset)\n}\n\
         flow chat \"Chat\" {\n  when \"the user says hello\"\n  on_enter { ask_model mood: \"How does {{name}} feel?\" }\n  \
         step ask { collect name }\n  auto step greet { ask_model greeting: \"Greet {{name}} warmly\" }\n}\n";
    let without = with_steps
        .replace("  on_enter { ask_model mood: \"How does {{name}} feel?\" }\n", "")
        .replace("ask_model greeting: \"Greet {{name}} warmly\"", "set greeting = \"Hi\"");
    let (_, program) = compiled(with_steps);
    let (_, plain) = compiled(&without);
    let (rows, plain_rows) = (costs(&program), costs(&plain));
    let answering = row(&rows, "chat", Some("ask"));
    // The step's model step and the flow's `on_enter` one, each repaired.
    assert_eq!(answering.model_steps, calls(0, 4));
    assert_eq!(answering.calls.worst, row(&plain_rows, "chat", Some("ask")).calls.worst + 4);
    assert!(
        answering.worst_tokens > row(&plain_rows, "chat", Some("ask")).worst_tokens,
        "the model steps' prompts count in the worst case"
    );
}

#[test]
fn the_post_signals_request_is_the_one_the_turn_sends() {
    // `ok` is a confirmation (a step collects it): after the reply the
    // message answers no step, so the turn never reads it there; `urgent`
    // is a yes/no no step collects, which it does read.
    let source = r#"
schema {
  n: int "A number"
  ok: bool "Whether it is fine"
  urgent: bool "Whether it is urgent"
}
signal late {
  when "the user says it is late"
  if n > 3
  phase post
  extract n, ok, urgent
}
flow f {
  step ask {
    prompt "A number?"
    collect n
  }
  step confirm {
    prompt "Fine?"
    collect ok
  }
}
"#;
    let (_, program) = compiled(source);
    let flow = crate::ids::FlowId::from_index(0);
    let request = super::post_request(&program, flow);
    let fields: Vec<&str> = request.fields.iter().map(|field| field.name.as_str()).collect();
    assert_eq!(fields, ["n", "urgent"]);
    let asked: Vec<&str> = request.signals.iter().map(|signal| signal.id.as_str()).collect();
    assert_eq!((request.active_flow.as_deref(), asked), (Some("f"), vec!["late"]));
}

const RUN: &str = r#"
agent A {
  limits {
    max_run_llm_calls 3
  }
}
schema {
  name: string
  greeting: string "A greeting"
  rating: int 1..5 "How warm it is"
}
flow greet "Greet" {
  requires name
  auto step greet { ask_model greeting: "Greet {{name}}." }
  auto step rate { ask_model rating: "Rate {{greeting}}." }
}
"#;

#[test]
fn a_run_whose_model_steps_can_make_more_calls_than_max_run_llm_calls_is_warned_at_the_step_that_goes_over() {
    // Two model steps, each its call and its repair at worst: 4 calls, the
    // fourth at `rate`'s.
    let (file, program) = compiled(RUN);
    let mut diagnostics = Vec::new();
    super::check(&program, &mut diagnostics);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    let warning = &diagnostics[0];
    assert_eq!(warning.code.as_str(), "run_budget");
    assert_eq!(warning.message, "a run of `greet` can spend up to 4 model calls, over `max_run_llm_calls` (3)");
    let text = |span: crate::source::Span| &file.text[span.start as usize..span.end as usize];
    let at = text(warning.labels[0].span);
    assert!(at.starts_with("ask_model rating"), "{at}");
    assert_eq!(warning.labels[0].text, "up to 4 model calls by this model step at worst");
    assert_eq!(text(warning.labels[1].span), "greet");
    // A budget one pass through fits in: no warning.
    let roomy = RUN.replace("max_run_llm_calls 3", "max_run_llm_calls 4");
    let (_, program) = compiled(&roomy);
    let mut diagnostics = Vec::new();
    super::check(&program, &mut diagnostics);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
}

#[test]
fn a_run_whose_prompts_alone_can_exceed_max_run_tokens_is_warned() {
    let source = RUN.replace("max_run_llm_calls 3", "max_run_tokens 100");
    let (_, program) = compiled(&source);
    let rows = costs(&program);
    let run = rows.iter().find(|row| row.start == Start::Run).expect("the run's row");
    assert!(run.worst_tokens > 100, "{}", run.worst_tokens);
    let mut diagnostics = Vec::new();
    super::check(&program, &mut diagnostics);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(
        diagnostics[0].message,
        format!("a run of `greet` can spend about {} prompt tokens, over `max_run_tokens` (100)", run.worst_tokens)
    );
    // A budget above the estimate: none.
    let roomy = source.replace("max_run_tokens 100", &format!("max_run_tokens {}", run.worst_tokens));
    let (_, program) = compiled(&roomy);
    let mut diagnostics = Vec::new();
    super::check(&program, &mut diagnostics);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
}

#[test]
fn a_model_step_in_a_loop_counts_once_and_the_warning_says_so() {
    let source = r#"
agent A {
  limits {
    max_run_llm_calls 1
  }
}
schema {
  names: list(string)
  greeting: string "A greeting"
}
flow greet "Greet" {
  requires names
  auto step greet_each {
    for name in names {
      ask_model greeting: "Greet {{name}}."
    }
  }
}
"#;
    let (_, program) = compiled(source);
    let mut diagnostics = Vec::new();
    super::check(&program, &mut diagnostics);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0].message, "a run of `greet` can spend up to 2 model calls, over `max_run_llm_calls` (1)");
    assert!(
        diagnostics[0].labels[1]
            .text
            .ends_with("a model step in a `for_each` counted for one item: it runs once per item"),
        "{}",
        diagnostics[0].labels[1].text
    );
    // Two calls fit one pass: a list of many items may still reach the
    // budget at run time, which no check can bound.
    check_findings(&source.replace("max_run_llm_calls 1", "max_run_llm_calls 2"), &[]);
}

#[test]
fn conversations_are_not_held_to_the_run_budgets() {
    let source = r#"
agent A {
  limits {
    max_run_llm_calls 1
    max_run_tokens 1
  }
}
schema {
  name: string
  greeting: string "A greeting"
}
flow f "F" {
  when "the user wants f"
  step ask { prompt "Name?" collect name on_enter { ask_model greeting: "Greet." } }
}
"#;
    check_findings(source, &[]);
}

#[test]
fn a_retried_step_counts_its_model_steps_on_every_attempt() {
    // `greet` may run three times (two retries), its model step each time
    // with its repair: 6 calls, the sixth past a budget of 5; `rate`
    // brings two more.
    let source = RUN.replace("max_run_llm_calls 3", "max_run_llm_calls 5").replace(
        r#"auto step greet { ask_model greeting: "Greet {{name}}." }"#,
        r#"auto step greet { ask_model greeting: "Greet {{name}}." on_error retry 2 }"#,
    );
    let (file, program) = compiled(&source);
    let mut diagnostics = Vec::new();
    super::check(&program, &mut diagnostics);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0].message, "a run of `greet` can spend up to 8 model calls, over `max_run_llm_calls` (5)");
    let span = diagnostics[0].labels[0].span;
    assert!(file.text[span.start as usize..span.end as usize].starts_with("ask_model greeting"));
    assert_eq!(diagnostics[0].labels[0].text, "up to 6 model calls by this model step at worst");
    assert!(diagnostics[0].labels[1].text.contains("on every attempt `on_error retry` allows"));
}
