//! Tests of the `.flow` front end: text in, AST and diagnostics out.

use super::*;
use crate::diag::Code;
use crate::source::Span;
use crate::syntax::ast::{
    Action, ActionKind, BodyValue, Directive, ExprKind, FlowDecl, Name, Number, OnError, StepDecl, Template,
    TemplatePart, Text, Then, ToolImpl,
};
use crate::syntax::expr::MAX_EXPR_DEPTH;

#[test]
fn a_large_program_parses_the_same_in_pieces_as_whole() {
    let text = crate::testgen::large_program(400, 20);
    assert!(split_at_items(&text, 2).len() == 2, "the program is large enough to be cut");
    let file = SourceFile::new("big.flow", text.clone());
    let (in_pieces, piece_diagnostics) = parse(&file);
    let (whole, whole_diagnostics) = parse_items(&text, 0..text.len()).unwrap();
    assert_eq!(piece_diagnostics, whole_diagnostics);
    assert_eq!(serde_json::to_value(&in_pieces).unwrap(), serde_json::to_value(&whole).unwrap());
    assert_eq!(in_pieces.flows.len(), 400);
}

#[test]
fn a_syntax_error_in_a_large_program_is_reported_as_in_a_small_one() {
    let mut text = crate::testgen::large_program(400, 20);
    let broken_at = text.rfind("prompt").unwrap();
    text.replace_range(broken_at..broken_at + 6, "promt");
    let (_, diagnostics) = parse(&SourceFile::new("big.flow", text.clone()));
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].code, Code::Syntax);
    assert_eq!(diagnostics[0].primary_span().map(|span| span.start as usize), Some(broken_at));
}

/// LANGUAGE.md section 10, with the schema of section 1.
const BOOKING: &str = r#"
# The hotel concierge.
agent Concierge {
  identity "You are the concierge of the Grand Hotel group."
  rule "Never promise a room before the booking tool confirms it."
  limits { max_auto_steps 10  turn_timeout 60s }
}

schema {
  hotel: string "Name of the hotel" examples "Grand Hotel", "Overlook"
  date: date "Check-in date"
  guests: int 1..10
  confirmed: bool
  plan: enum(free, pro, enterprise)
  booking_id: string
}

tool book_hotel(hotel: string, date: date, guests: int) -> { booking_id: string } {
  description "Reserve a room and return its booking id."
  http POST "http://127.0.0.1:8080/bookings" timeout 10s
}

flow booking "Book a hotel room" {
  when "the user wants to book a hotel room"
  requires hotel, date, guests

  step ask_hotel {
    prompt "Which hotel would you like to book?"
    collect hotel
  }
  step ask_date {
    prompt "For which date?"
    collect date
  }
  step ask_guests {
    prompt "How many guests?"
    collect guests
    skip_if guests is set
  }
  step confirm {
    requires hotel, date, guests
    prompt "Shall I book {{hotel}} on {{date}} for {{guests}} guests?"
    collect confirmed
    branch {
      if confirmed == true                      -> book
      when "the user wants to change the date" -> ask_date  "change date"
      else                                      -> cancelled
    }
  }
  auto step book {
    call book_hotel(hotel, date, guests) -> booking_id
    say "Booked! Your confirmation number is {{booking_id}}."
    next end
  }
  step cancelled { say "No problem, nothing was booked." }
}
"#;

fn parse_text(source: &str) -> (Program, Vec<Diagnostic>) {
    parse(&SourceFile::new("test.flow", source))
}

/// Parses a program that must have no diagnostic.
fn check(source: &str) -> Program {
    let (program, diagnostics) = parse_text(source);
    assert!(diagnostics.is_empty(), "unexpected diagnostics: {diagnostics:#?}");
    program
}

/// Parses a program that must have exactly one diagnostic.
fn one_error(source: &str) -> Diagnostic {
    let (_, mut diagnostics) = parse_text(source);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    diagnostics.remove(0)
}

fn slice(source: &str, span: Span) -> &str {
    source.get(span.range()).unwrap_or("<not on a char boundary>")
}

fn names(names: &[Name]) -> Vec<&str> {
    names.iter().map(|name| name.value.as_str()).collect()
}

fn texts(texts: &[Text]) -> Vec<&str> {
    texts.iter().map(|text| text.value.as_str()).collect()
}

/// A template as text, with `{{…}}` around each interpolated expression's source.
fn template(source: &str, template: &Template) -> String {
    template
        .parts
        .iter()
        .map(|part| match part {
            TemplatePart::Text(text) => text.clone(),
            TemplatePart::Expr(expr) => format!("{{{{{}}}}}", slice(source, expr.span)),
        })
        .collect()
}

fn only_flow(program: &Program) -> &FlowDecl {
    assert_eq!(program.flows.len(), 1);
    &program.flows[0]
}

fn only_step(program: &Program) -> &StepDecl {
    let flow = only_flow(program);
    assert_eq!(flow.steps.len(), 1);
    &flow.steps[0]
}

fn step_id(step: &StepDecl) -> &str {
    step.id.as_ref().map_or("", |id| id.value.as_str())
}

fn target_name(then: Option<&Then>) -> &str {
    match then {
        Some(Then::Target(name)) => &name.value,
        other => panic!("not a bare target: {other:?}"),
    }
}

fn directive(then: Option<&Then>) -> &Directive {
    match then {
        Some(Then::Directive(directive)) => directive,
        other => panic!("not a directive: {other:?}"),
    }
}

/// The directive of the single branch entry of a one-step program.
fn branch_directive(program: &Program) -> &Directive {
    let branches = &only_step(program).branches.as_ref().expect("branches").value;
    directive(branches[0].then.as_ref())
}

fn in_step(body: &str) -> String {
    format!("flow f {{\n  step s {{\n    {body}\n  }}\n}}\n")
}

fn in_branch(entry: &str) -> String {
    in_step(&format!("branch {{ {entry} }}"))
}

// ------------------------------------------------------------ the booking program

#[test]
fn booking_program_parses_into_the_expected_ast() {
    let program = check(BOOKING);

    let agent = program.agent.as_ref().expect("agent");
    assert_eq!(agent.name.as_ref().map(|name| name.value.as_str()), Some("Concierge"));
    assert_eq!(agent.rules.len(), 1);
    assert_eq!(agent.limits.max_auto_steps.as_ref().map(|limit| limit.value), Some(10));
    assert_eq!(agent.limits.turn_timeout.as_ref().map(|limit| limit.value.as_str()), Some("60s"));

    let field_names: Vec<&str> = program.schema.iter().map(|field| field.name.value.as_str()).collect();
    assert_eq!(field_names, ["hotel", "date", "guests", "confirmed", "plan", "booking_id"]);
    let hotel = &program.schema[0].ty;
    assert_eq!(hotel.name.value, "string");
    assert_eq!(hotel.description.as_ref().map(|text| text.value.as_str()), Some("Name of the hotel"));
    assert_eq!(texts(&hotel.examples), ["Grand Hotel", "Overlook"]);
    let guests = &program.schema[2].ty;
    assert_eq!(guests.min.as_ref().map(|min| min.value), Some(Number::Int(1)));
    assert_eq!(guests.max.as_ref().map(|max| max.value), Some(Number::Int(10)));
    let plan = &program.schema[4].ty;
    assert_eq!(texts(&plan.values.as_ref().expect("values").value), ["free", "pro", "enterprise"]);

    let tool = &program.tools[0];
    assert_eq!(tool.name.value, "book_hotel");
    assert_eq!(
        names(&tool.params.iter().map(|param| param.name.clone()).collect::<Vec<_>>()),
        ["hotel", "date", "guests"]
    );
    assert_eq!(tool.returns.as_ref().map(|returns| returns.value.len()), Some(1));
    let [ToolImpl::Http(http)] = tool.implementations.as_slice() else {
        panic!("one http implementation: {:?}", tool.implementations)
    };
    assert_eq!(http.method.value, "POST");
    assert_eq!(template(BOOKING, &http.url), "http://127.0.0.1:8080/bookings");
    assert_eq!(http.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("10s"));

    let flow = only_flow(&program);
    assert_eq!(flow.name.value, "booking");
    assert_eq!(slice(BOOKING, flow.name.span), "booking");
    assert_eq!(flow.title.as_ref().map(|title| title.value.as_str()), Some("Book a hotel room"));
    assert_eq!(texts(&flow.when), ["the user wants to book a hotel room"]);
    assert_eq!(names(&flow.requires), ["hotel", "date", "guests"]);
    assert!(slice(BOOKING, flow.span).starts_with("flow booking"));
    assert!(slice(BOOKING, flow.span).ends_with("nothing was booked.\" }\n}"));

    let step_ids: Vec<&str> = flow.steps.iter().map(step_id).collect();
    assert_eq!(step_ids, ["ask_hotel", "ask_date", "ask_guests", "confirm", "book", "cancelled"]);
    let ask_hotel = &flow.steps[0];
    assert_eq!(ask_hotel.id.as_ref().map(|id| slice(BOOKING, id.span)), Some("ask_hotel"));
    assert_eq!(names(&ask_hotel.collect), ["hotel"]);
    assert!(ask_hotel.auto.is_none());
    assert!(slice(BOOKING, ask_hotel.span).starts_with("step ask_hotel {"));

    let skip_if = flow.steps[2].skip_if.as_ref().expect("skip_if");
    assert_eq!(slice(BOOKING, skip_if.span), "guests is set");

    let confirm = &flow.steps[3];
    assert_eq!(
        confirm.prompt.as_ref().map(|prompt| template(BOOKING, prompt)).as_deref(),
        Some("Shall I book {{hotel}} on {{date}} for {{guests}} guests?")
    );
    let branches = &confirm.branches.as_ref().expect("branches").value;
    assert_eq!(branches.len(), 3);
    assert_eq!(slice(BOOKING, branches[0].guard[0].span), "confirmed == true");
    assert_eq!(target_name(branches[0].then.as_ref()), "book");
    assert_eq!(texts(&branches[1].when), ["the user wants to change the date"]);
    assert_eq!(target_name(branches[1].then.as_ref()), "ask_date");
    assert_eq!(branches[1].label.as_ref().map(|label| label.value.as_str()), Some("change date"));
    assert!(branches[2].guard.is_empty() && branches[2].when.is_empty());
    let Some(Then::Target(cancelled)) = &branches[2].then else { panic!("else has a bare target") };
    assert_eq!(slice(BOOKING, cancelled.span), "cancelled");
    assert!(slice(BOOKING, branches[2].span).starts_with("else"));

    let book = &flow.steps[4];
    assert_eq!(book.auto.as_ref().map(|auto| (auto.value, slice(BOOKING, auto.span))), Some((true, "auto")));
    assert!(slice(BOOKING, book.span).starts_with("auto step book"));
    assert_eq!(book.next.as_ref().map(|next| next.value.as_str()), Some("end"));
    assert_eq!(
        book.say.as_ref().map(|say| template(BOOKING, say)).as_deref(),
        Some("Booked! Your confirmation number is {{booking_id}}.")
    );
    let [Action { kind: ActionKind::Call(call), .. }] = book.actions.as_slice() else {
        panic!("one call: {:?}", book.actions)
    };
    assert_eq!(call.tool.value, "book_hotel");
    assert_eq!(call.save.as_ref().map(|save| save.value.as_str()), Some("booking_id"));

    let cancelled_step = &flow.steps[5];
    assert_eq!(
        cancelled_step.say.as_ref().map(|say| template(BOOKING, say)).as_deref(),
        Some("No problem, nothing was booked.")
    );
}

/// The `.flow` twin of the YAML front end's every-key fixture: with spans
/// set aside, both read into the same AST (checked against that front
/// end; YAML's `halt: false` has no `.flow` spelling and was left out).
const EVERY_KEY: &str = r#"agent Helpdesk {
  identity "You help {{ context.tier }} customers."
  rule "Be brief."
  limits { max_auto_steps 5 max_tool_rounds 3 max_turn_tokens 20000 turn_timeout 30s }
}
schema {
  email: string "Account email" pattern "^[^@]+@[^@]+$" examples "a@b.c"
  plan: enum(free, pro)
  count: int 0..99
  contacts: list(object { name: string, email: string })
  ok: bool
}
context {
  tier: enum(basic, gold)
}
tool lookup(email: string) -> { name: string } {
  description "Find a customer."
  http GET "https://example.com/customers?email={{email}}"
  header Accept "application/json"
  body [1, 2.5, true, null, "{{email}}", { nested: "x" }]
  timeout 5s
}
tool clock { builtin now }
tool script() { exec "./run.sh" timeout 1m }
signal human {
  when "the user wants a person", "the user is angry"
  if context.tier == "gold"
  phase both
  behavior once 10m
  extract email
  then goto handoff with { ok: false }
}
flow main "Main" {
  when "the user needs help"
  if context.tier is set
  default
  requires email
  optional plan
  rule "Stay polite."
  on_enter { say "Welcome." }
  on_complete { emit { append_prompt "Thank the user." inject_tools clock } }
  complete next handoff
  step ask {
    prompt "What is your email?"
    collect email
    skip_if email is set
    when "the user has an account"
    if count < 3
    max_asks 2
    on_no_answer { abort "no email" reply "Bye." }
    tools lookup
    on_enter { set count = count + 1 }
    prepare { emit append_prompt "Ask once." }
    finalize { emit set_context tier = "basic" }
    branch {
      if ok == true, count > 1 when "the user agrees" -> goto_step handoff.connect "agreed"
      -> work
    }
  }
  auto step work {
    on_error retry 2 backoff 1s
    wait 1h
    call lookup(email) -> contacts
    for c in contacts where c.email is set { say "Hi {{c.name}}" }
    emit { complete next handoff reset goto main goto_step ask }
    next end
  }
}
flow handoff {
  step connect { say "Connecting you now." }
}
"#;

#[test]
fn every_key_reads_clean() {
    let program = check(EVERY_KEY);
    assert_eq!(program.tools.len(), 3);
    assert_eq!(program.flows.len(), 2);
    let main = &program.flows[0];
    assert_eq!((main.on_enter.len(), main.on_complete.len()), (1, 1));
    let ask = &main.steps[0];
    assert_eq!(ask.max_asks.as_ref().map(|max| max.value), Some(2));
    assert!(ask.on_no_answer.as_ref().is_some_and(|directive| directive.abort.is_some() && directive.reply.is_some()));
    assert_eq!((ask.on_enter.len(), ask.prepare.len(), ask.finalize.len()), (1, 1, 1));
    let work = &main.steps[1];
    assert_eq!(work.wait.as_ref().map(|wait| wait.value.as_str()), Some("1h"));
    assert_eq!(work.actions.len(), 3);
    let ActionKind::Emit(emitted) = &work.actions[2].kind else { panic!("emit") };
    assert!(emitted.complete.is_some() && emitted.goto.is_some() && emitted.goto_step.is_some());
    assert!(emitted.reset.as_ref().is_some_and(|reset| reset.value));
    let signal = &program.signals[0];
    assert_eq!(
        (signal.behavior.as_ref().map(|b| b.value.as_str()), signal.cooldown.as_ref().map(|c| c.value.as_str())),
        (Some("once"), Some("10m"))
    );
}

// ------------------------------------------------------------ helpers for the test modules below

/// Runs `work` on a thread with a main thread's stack. In debug builds
/// the expression builder needs about 40 KiB of stack per bracket level,
/// more than a 2 MiB test thread holds at the nesting limit.
fn with_main_thread_stack<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let handle =
            std::thread::Builder::new().stack_size(8 << 20).spawn_scoped(scope, work).expect("spawn a parser thread");
        match handle.join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

mod declarations;
mod errors;
mod flows;
mod properties;
