//! Tests of the `.flow` front end: text in, AST and diagnostics out.

use super::*;
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

// ------------------------------------------------------------ agent, schema, context

#[test]
fn agent_limits_take_numbers_and_a_duration() {
    let program = check(
        "agent A { identity \"I am {{ context.tier }}\" rule \"a\" rule \"b\"
               limits { max_auto_steps 3 max_tool_rounds 4 max_turn_tokens 20000 turn_timeout 90s } }",
    );
    let agent = program.agent.expect("agent");
    assert_eq!(agent.rules.len(), 2);
    assert!(matches!(agent.identity.as_ref().map(|identity| identity.parts.len()), Some(2)));
    assert_eq!(agent.limits.max_tool_rounds.map(|limit| limit.value), Some(4));
    assert_eq!(agent.limits.max_turn_tokens.map(|limit| limit.value), Some(20000));
    assert_eq!(agent.limits.turn_timeout.map(|limit| limit.value), Some("90s".to_string()));
}

#[test]
fn a_count_limit_given_a_duration_is_refused() {
    let source = "agent A { limits { max_auto_steps 10s } }";
    let error = one_error(source);
    assert_eq!(error.code, Code::Syntax);
    assert_eq!(error.message, "`max_auto_steps` takes a whole number");
    assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("10s"));
}

#[test]
fn type_options_fill_the_type() {
    let source = r#"schema {
            score: float -1.5..2.5 "A score"
            age: int 18..
            code: string pattern "^[A-Z]+$" examples "AB", 'CD'
            tags: list(string) ..5
            tier: enum(basic, "gold plus")
            contacts: list(object { name: string, email: string "Where to write" })
        }"#;
    let program = check(source);
    let [score, age, code, tags, tier, contacts] = program.schema.as_slice() else { panic!("six fields") };
    assert_eq!(score.ty.min.as_ref().map(|min| min.value), Some(Number::Float(-1.5)));
    assert_eq!(score.ty.max.as_ref().map(|max| max.value), Some(Number::Float(2.5)));
    assert_eq!(score.ty.description.as_ref().map(|text| text.value.as_str()), Some("A score"));
    assert_eq!(age.ty.min.as_ref().map(|min| min.value), Some(Number::Int(18)));
    assert!(age.ty.max.is_none());
    assert_eq!(code.ty.pattern.as_ref().map(|pattern| pattern.value.as_str()), Some("^[A-Z]+$"));
    assert_eq!(texts(&code.ty.examples), ["AB", "CD"]);
    assert!(tags.ty.min.is_none());
    assert_eq!(tags.ty.max.as_ref().map(|max| max.value), Some(Number::Int(5)));
    assert_eq!(tags.ty.name.value, "list");
    assert_eq!(tags.ty.items.as_ref().map(|items| items.name.value.as_str()), Some("string"));

    assert_eq!(tier.ty.name.value, "enum");
    assert_eq!(slice(source, tier.ty.name.span), "enum");
    let values = tier.ty.values.as_ref().expect("values");
    assert_eq!(texts(&values.value), ["basic", "gold plus"]);
    assert_eq!(slice(source, values.span), "(basic, \"gold plus\")");
    assert_eq!(slice(source, values.value[1].span), "\"gold plus\"");
    assert_eq!(slice(source, tier.span), "tier: enum(basic, \"gold plus\")");

    let object = contacts.ty.items.as_ref().expect("items");
    assert_eq!(object.name.value, "object");
    let fields = object.fields.as_ref().expect("fields");
    assert!(slice(source, fields.span).starts_with('{') && slice(source, fields.span).ends_with('}'));
    assert_eq!(fields.value.len(), 2);
    assert_eq!(fields.value[1].ty.description.as_ref().map(|text| text.value.as_str()), Some("Where to write"));
}

#[test]
fn an_empty_enum_keeps_its_empty_values() {
    let program = check("schema { nothing: enum() }");
    assert_eq!(program.schema[0].ty.values.as_ref().map(|values| values.value.len()), Some(0));
}

#[test]
fn context_and_several_schema_blocks_accumulate() {
    let program = check("schema { a: int } context { tier: enum(basic, gold) } schema { b: bool, c: date }");
    assert_eq!(program.schema.iter().map(|field| field.name.value.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(program.context.len(), 1);
    assert_eq!(program.context[0].name.value, "tier");
}

#[test]
fn a_second_agent_is_a_duplicate() {
    let source = "agent A { } agent B { }";
    let error = one_error(source);
    assert_eq!(error.code, Code::DuplicateKey);
    assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("B"));
}

// ------------------------------------------------------------ tools

#[test]
fn http_tool_takes_headers_body_and_timeout_in_any_order() {
    let source = r#"tool notify(to: string, count: int) {
            header Authorization "Bearer {{ env.TOKEN }}"
            http POST "https://example.test/{{to}}"
            header "X-Trace" "flowc"
            body { to: "{{to}}", "n": [1, 2.5, -3], ok: true, none: null }
            timeout 5s
        }"#;
    let program = check(source);
    let tool = &program.tools[0];
    let [ToolImpl::Http(http)] = tool.implementations.as_slice() else { panic!("one http implementation") };
    let header_names: Vec<&str> = http.headers.iter().map(|(name, _)| name.value.as_str()).collect();
    assert_eq!(header_names, ["Authorization", "X-Trace"]);
    assert_eq!(template(source, &http.headers[0].1), "Bearer {{env.TOKEN}}");
    assert_eq!(template(source, &http.url), "https://example.test/{{to}}");
    assert_eq!(http.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("5s"));
    let Some(BodyValue::Object(members)) = &http.body else { panic!("an object body") };
    let keys: Vec<&str> = members.value.iter().map(|(key, _)| key.value.as_str()).collect();
    assert_eq!(keys, ["to", "n", "ok", "none"]);
    assert!(matches!(&members.value[0].1, BodyValue::String(value) if template(source, value) == "{{to}}"));
    let BodyValue::List(numbers) = &members.value[1].1 else { panic!("a list") };
    let numbers: Vec<Number> = numbers
        .value
        .iter()
        .filter_map(|item| match item {
            BodyValue::Number(number) => Some(number.value),
            _ => None,
        })
        .collect();
    assert_eq!(numbers, [Number::Int(1), Number::Float(2.5), Number::Int(-3)]);
    assert!(matches!(&members.value[2].1, BodyValue::Bool(flag) if flag.value));
    assert!(matches!(&members.value[3].1, BodyValue::Null(_)));
}

#[test]
fn exec_and_builtin_tools_and_tools_without_params() {
    let source = r#"
            tool lookup(email: string) { exec "./tools/lookup.sh" "--json" timeout 3s }
            tool clock { builtin now }
            tool twice() { builtin uuid exec "x" }
        "#;
    let program = check(source);
    let [ToolImpl::Exec(exec)] = program.tools[0].implementations.as_slice() else { panic!("exec") };
    assert_eq!(texts(&exec.command), ["./tools/lookup.sh", "--json"]);
    assert_eq!(exec.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("3s"));
    let clock = &program.tools[1];
    assert!(clock.params.is_empty() && clock.returns.is_none());
    let [ToolImpl::Builtin { name, span }] = clock.implementations.as_slice() else { panic!("builtin") };
    assert_eq!(name.value, "now");
    assert_eq!(slice(source, *span), "builtin now");
    // Two implementations are kept for lowering to report `invalid_tool`.
    assert_eq!(program.tools[2].implementations.len(), 2);
}

#[test]
fn returns_span_the_braces() {
    let source = "tool t(a: int) -> { b: int } { builtin echo }";
    let program = check(source);
    let returns = program.tools[0].returns.as_ref().expect("returns");
    assert_eq!(slice(source, returns.span), "{ b: int }");
}

#[test]
fn header_or_body_without_http_is_refused() {
    let source = "tool t { exec \"x\" header Accept \"json\" }";
    let error = one_error(source);
    assert_eq!(error.code, Code::Syntax);
    assert_eq!(error.message, "`header` needs an `http` request in the same tool");
    assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("header Accept \"json\""));
    let (_, diagnostics) = parse_text("tool t { builtin now body { a: 1 } timeout 2s }");
    let messages: Vec<&str> = diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect();
    assert_eq!(
        messages,
        ["`body` needs an `http` request in the same tool", "`timeout` needs an `http` or `exec` tool"]
    );
}

// ------------------------------------------------------------ signals

#[test]
fn signal_clauses_fill_the_signal() {
    let source = r#"signal wants_human {
            when "the user asks for a human", "the user is angry"
            if context.tier == "gold", len(history) > 2
            phase both
            behavior cooldown 10m
            extract reason, urgency
            then { goto handoff  reply "One moment." }
        }"#;
    let program = check(source);
    let signal = &program.signals[0];
    assert_eq!(slice(source, signal.name.span), "wants_human");
    assert_eq!(signal.when.len(), 2);
    assert_eq!(signal.guard.len(), 2);
    assert_eq!(signal.phase.as_ref().map(|phase| phase.value.as_str()), Some("both"));
    assert_eq!(signal.behavior.as_ref().map(|behavior| behavior.value.as_str()), Some("cooldown"));
    assert_eq!(signal.cooldown.as_ref().map(|cooldown| cooldown.value.as_str()), Some("10m"));
    assert_eq!(names(&signal.extract), ["reason", "urgency"]);
    let then = directive(signal.then.as_ref());
    assert_eq!(then.goto.as_ref().and_then(|goto| goto.flow.as_ref()).map(|flow| flow.value.as_str()), Some("handoff"));
    assert!(then.reply.is_some());
    assert_eq!(slice(source, then.span), "{ goto handoff  reply \"One moment.\" }");
}

#[test]
fn behavior_once_has_no_cooldown() {
    let program = check("signal s { when \"x\" behavior once then goto f }");
    assert_eq!(program.signals[0].behavior.as_ref().map(|behavior| behavior.value.as_str()), Some("once"));
    assert!(program.signals[0].cooldown.is_none());
}

// ------------------------------------------------------------ flows

#[test]
fn flow_clauses_fill_the_flow() {
    let source = r#"flow support {
            when "a", "b"
            if context.tier is set, true
            default
            requires email
            optional plan, phone
            rule "Keep answers short."
            on_enter { set plan = "free" }
            on_complete { emit complete }
            complete next survey
            step only { say "hi" }
        }"#;
    let program = check(source);
    let flow = only_flow(&program);
    assert!(flow.title.is_none());
    assert_eq!(texts(&flow.when), ["a", "b"]);
    assert_eq!(flow.guard.len(), 2);
    assert_eq!(
        flow.default.as_ref().map(|default| (default.value, slice(source, default.span))),
        Some((true, "default"))
    );
    assert_eq!(names(&flow.requires), ["email"]);
    assert_eq!(names(&flow.optional), ["plan", "phone"]);
    assert_eq!(flow.rules.len(), 1);
    assert!(matches!(flow.on_enter.as_slice(), [Action { kind: ActionKind::Set(_), .. }]));
    assert!(matches!(flow.on_complete.as_slice(), [Action { kind: ActionKind::Emit(_), .. }]));
    assert_eq!(flow.complete_next.as_ref().map(|next| slice(source, next.span)), Some("survey"));
}

// ------------------------------------------------------------ steps

#[test]
fn every_step_key_has_a_clause() {
    let source = r#"flow f { step s {
            prompt "Ask"
            collect a, b
            requires c
            skip_if a is set
            when "the user is ready"
            if b > 1, c
            next other
            prepare { say "p" }
            finalize { set a = 1 }
            on_enter { emit halt }
            tools lookup, book
            max_asks 2
            on_no_answer goto_step other
            on_error retry 3 backoff 2s
            wait 2d
        } }"#;
    let program = check(source);
    let step = only_step(&program);
    assert_eq!(step.prompt.as_ref().map(|prompt| template(source, prompt)).as_deref(), Some("Ask"));
    assert_eq!(names(&step.collect), ["a", "b"]);
    assert_eq!(names(&step.requires), ["c"]);
    assert!(step.skip_if.is_some());
    assert_eq!(texts(&step.when), ["the user is ready"]);
    assert_eq!(step.guard.iter().map(|guard| slice(source, guard.span)).collect::<Vec<_>>(), ["b > 1", "c"]);
    assert_eq!(step.next.as_ref().map(|next| next.value.as_str()), Some("other"));
    assert!(matches!(step.prepare.as_slice(), [Action { kind: ActionKind::Say(_), .. }]));
    assert!(matches!(step.finalize.as_slice(), [Action { kind: ActionKind::Set(_), .. }]));
    assert!(matches!(step.on_enter.as_slice(), [Action { kind: ActionKind::Emit(_), .. }]));
    assert_eq!(names(&step.tools), ["lookup", "book"]);
    assert_eq!(step.max_asks.as_ref().map(|max_asks| max_asks.value), Some(2));
    let on_no_answer = step.on_no_answer.as_ref().expect("on_no_answer");
    assert_eq!(
        on_no_answer.goto_step.as_ref().and_then(|goto_step| goto_step.step.as_ref()).map(|step| step.value.as_str()),
        Some("other")
    );
    let Some(OnError::Retry { times, backoff, span }) = &step.on_error else { panic!("retry") };
    assert_eq!(times.value, 3);
    assert_eq!(backoff.as_ref().map(|backoff| backoff.value.as_str()), Some("2s"));
    assert_eq!(slice(source, *span), "retry 3 backoff 2s");
    assert_eq!(step.wait.as_ref().map(|wait| wait.value.as_str()), Some("2d"));
    assert!(step.auto.is_none() && step.branches.is_none() && step.actions.is_empty());
}

#[test]
fn on_error_stop_and_continue() {
    let stop = check(&in_step("on_error stop"));
    assert!(matches!(only_step(&stop).on_error, Some(OnError::Stop(_))));
    let keep_going = check(&in_step("on_error continue"));
    assert!(matches!(only_step(&keep_going).on_error, Some(OnError::Continue(_))));
    let error = one_error(&in_step("on_error ignore"));
    assert_eq!(error.message, "unknown `on_error` policy `ignore`");
}

#[test]
fn on_no_answer_refuses_a_bare_name() {
    let source = in_step("on_no_answer cancelled");
    let error = one_error(&source);
    assert_eq!(error.code, Code::Syntax);
    assert_eq!(error.primary_span().map(|span| slice(&source, span)), Some("cancelled"));
    assert!(error.help.as_deref().is_some_and(|help| help.contains("goto_step cancelled")));
}

#[test]
fn max_asks_must_be_whole() {
    let error = one_error(&in_step("max_asks 1.5"));
    assert_eq!(error.message, "`max_asks` takes a whole number");
}

#[test]
fn a_clause_given_twice_is_a_duplicate_key() {
    let source = in_step("prompt \"a\"\n    prompt \"b\"");
    let error = one_error(&source);
    assert_eq!(error.code, Code::DuplicateKey);
    assert_eq!(error.message, "`prompt` is given twice in this step");
    assert_eq!(error.primary_span().map(|span| slice(&source, span)), Some("prompt \"b\""));
    assert_eq!(error.labels.get(1).map(|label| slice(&source, label.span)), Some("prompt \"a\""));
}

#[test]
fn body_actions_and_do_blocks_keep_source_order() {
    let source = in_step(
        r#"say "Step say"
            set a = 1
            do { say "Action say"  call t() }
            emit reset
            do { set b = 2 }
            for c in contacts { set n = n + 1 }"#,
    );
    let program = check(&source);
    let step = only_step(&program);
    assert_eq!(step.say.as_ref().map(|say| template(&source, say)).as_deref(), Some("Step say"));
    let kinds: Vec<&str> = step
        .actions
        .iter()
        .map(|action| match &action.kind {
            ActionKind::Set(_) => "set",
            ActionKind::Call(_) => "call",
            ActionKind::Emit(_) => "emit",
            ActionKind::Say(_) => "say",
            ActionKind::ForEach(_) => "for",
        })
        .collect();
    assert_eq!(kinds, ["set", "say", "call", "emit", "set", "for"]);
    assert_eq!(slice(&source, step.actions[0].span), "set a = 1");
    let ActionKind::Set(assignments) = &step.actions[0].kind else { panic!("set") };
    assert_eq!(assignments.len(), 1);
    assert_eq!(slice(&source, assignments[0].name.span), "a");
    assert_eq!(slice(&source, assignments[0].value.span), "1");
}

#[test]
fn one_set_may_assign_several_fields() {
    let source = in_step("set a = 1, b = a + 1");
    let program = check(&source);
    let [Action { kind: ActionKind::Set(assignments), span }] = only_step(&program).actions.as_slice() else {
        panic!("one set action")
    };
    let fields: Vec<&str> = assignments.iter().map(|assignment| assignment.name.value.as_str()).collect();
    assert_eq!(fields, ["a", "b"]);
    assert_eq!(slice(&source, *span), "set a = 1, b = a + 1");
    assert_eq!(slice(&source, assignments[1].value.span), "a + 1");
}

#[test]
fn auto_is_absent_unless_written() {
    let source = "flow f { auto step a { set x = 1 } step b { } }";
    let program = check(source);
    let flow = only_flow(&program);
    assert_eq!(flow.steps[0].auto.as_ref().map(|auto| slice(source, auto.span)), Some("auto"));
    assert!(flow.steps[1].auto.is_none());
}

#[test]
fn an_empty_branch_block_is_kept_empty() {
    let program = check(&in_step("branch { }"));
    let branches = only_step(&program).branches.as_ref().expect("branches");
    assert!(branches.value.is_empty());
}

#[test]
fn branch_entries_take_guards_whens_and_labels() {
    let source = in_branch(
        r#"if a == 1, b when "x", "y" -> first "both"
               -> second
               else -> { abort "why" } "give up""#,
    );
    let program = check(&source);
    let branches = &only_step(&program).branches.as_ref().expect("branches").value;
    assert_eq!(branches[0].guard.len(), 2);
    assert_eq!(texts(&branches[0].when), ["x", "y"]);
    assert_eq!(branches[0].label.as_ref().map(|label| label.value.as_str()), Some("both"));
    assert_eq!(slice(&source, branches[0].span), "if a == 1, b when \"x\", \"y\" -> first \"both\"");
    assert!(branches[1].guard.is_empty() && branches[1].when.is_empty());
    assert_eq!(target_name(branches[1].then.as_ref()), "second");
    let abort = directive(branches[2].then.as_ref()).abort.as_ref().expect("abort");
    assert_eq!(abort.reason.as_ref().map(|reason| template(&source, reason)).as_deref(), Some("why"));
    assert_eq!(branches[2].label.as_ref().map(|label| label.value.as_str()), Some("give up"));
}

// ------------------------------------------------------------ directives

#[test]
fn a_keyword_prefix_of_a_name_is_a_target() {
    let program = check(&in_branch("-> completed"));
    let branches = &only_step(&program).branches.as_ref().expect("branches").value;
    assert_eq!(target_name(branches[0].then.as_ref()), "completed");
    let program = check(&in_branch("-> halted -> resetting -> abortive -> goto_x"));
    let branches = &only_step(&program).branches.as_ref().expect("branches").value;
    let targets: Vec<&str> = branches.iter().map(|branch| target_name(branch.then.as_ref())).collect();
    assert_eq!(targets, ["halted", "resetting", "abortive", "goto_x"]);
    let program = check(&in_branch("-> complete"));
    assert!(branch_directive(&program).complete.is_some());
}

#[test]
fn goto_with_data_and_goto_step_across_flows() {
    let source = in_branch("-> goto billing with { plan: \"pro\", seats: seats + 1 }");
    let program = check(&source);
    let goto = branch_directive(&program).goto.as_ref().expect("goto");
    assert_eq!(goto.flow.as_ref().map(|flow| slice(&source, flow.span)), Some("billing"));
    assert_eq!(names(&goto.data.iter().map(|data| data.name.clone()).collect::<Vec<_>>()), ["plan", "seats"]);
    assert_eq!(slice(&source, goto.data[1].value.span), "seats + 1");

    let program = check(&in_branch("-> goto_step billing.ask_card"));
    let goto_step = branch_directive(&program).goto_step.as_ref().expect("goto_step");
    assert_eq!(goto_step.flow.as_ref().map(|flow| flow.value.as_str()), Some("billing"));
    assert_eq!(goto_step.step.as_ref().map(|step| step.value.as_str()), Some("ask_card"));
    let program = check(&in_branch("-> goto_step ask_card"));
    let goto_step = branch_directive(&program).goto_step.as_ref().expect("goto_step");
    assert!(goto_step.flow.is_none());
    assert_eq!(goto_step.step.as_ref().map(|step| step.value.as_str()), Some("ask_card"));
}

#[test]
fn clause_block_accumulates_every_key() {
    let source = in_branch(
        r#"-> {
                complete next survey
                reset
                reply "Done {{name}}"
                set a = 1
                set b = a, c = b
                set_context tier = "gold"
                append_prompt "Be brief."
                append_prompt "Be kind.", "Be {{ mood }}."
                inject_tools lookup, book
                halt
            }"#,
    );
    let program = check(&source);
    let directive = branch_directive(&program);
    assert_eq!(
        directive.complete.as_ref().and_then(|complete| complete.next.as_ref()).map(|next| next.value.as_str()),
        Some("survey")
    );
    assert_eq!(directive.reset.as_ref().map(|reset| reset.value), Some(true));
    assert_eq!(directive.halt.as_ref().map(|halt| slice(&source, halt.span)), Some("halt"));
    assert_eq!(directive.reply.as_ref().map(|reply| template(&source, reply)).as_deref(), Some("Done {{name}}"));
    assert_eq!(names(&directive.set.iter().map(|set| set.name.clone()).collect::<Vec<_>>()), ["a", "b", "c"]);
    assert_eq!(directive.set_context.len(), 1);
    assert_eq!(directive.append_prompt.len(), 3);
    assert_eq!(names(&directive.inject_tools), ["lookup", "book"]);
    assert!(slice(&source, directive.span).starts_with('{') && slice(&source, directive.span).ends_with('}'));
}

#[test]
fn single_clauses_are_directives_spanning_the_clause() {
    let source = in_branch("-> abort -> complete -> reply \"ok\" -> set_context k = 1");
    let program = check(&source);
    let branches = &only_step(&program).branches.as_ref().expect("branches").value;
    let abort = directive(branches[0].then.as_ref());
    assert!(abort.abort.as_ref().is_some_and(|abort| abort.reason.is_none()));
    assert_eq!(slice(&source, abort.span), "abort");
    let complete = directive(branches[1].then.as_ref());
    assert!(complete.complete.as_ref().is_some_and(|complete| complete.next.is_none()));
    assert_eq!(slice(&source, directive(branches[2].then.as_ref()).span), "reply \"ok\"");
    assert_eq!(slice(&source, directive(branches[3].then.as_ref()).span), "set_context k = 1");
}

#[test]
fn two_position_clauses_are_kept_but_a_repeated_one_is_a_duplicate() {
    let program = check(&in_branch("-> { goto a goto_step b }"));
    let directive = branch_directive(&program);
    assert!(directive.goto.is_some() && directive.goto_step.is_some());
    let error = one_error(&in_branch("-> { goto a goto b }"));
    assert_eq!(error.message, "`goto` is given twice in this directive");
}

#[test]
fn spans_stop_before_trailing_space_and_comments() {
    let source =
        in_branch("if (a == 1) and not b   # why\n   -> complete   # the reason\n  \"label\"\n -> { halt }  # done\n");
    let program = check(&source);
    let branches = &only_step(&program).branches.as_ref().expect("branches").value;
    assert_eq!(slice(&source, branches[0].guard[0].span), "a == 1) and not b");
    let ExprKind::Binary { right, .. } = &branches[0].guard[0].kind else { panic!("and") };
    assert_eq!(slice(&source, right.span), "not b");
    assert_eq!(slice(&source, directive(branches[0].then.as_ref()).span), "complete");
    assert!(slice(&source, branches[0].span).ends_with("\"label\""));
    assert_eq!(slice(&source, branches[1].span), "-> { halt }");
    let program = check("flow f { step s { skip_if x is not set   # note\n } }");
    let skip_if = only_step(&program).skip_if.as_ref().expect("skip_if");
    assert_eq!(skip_if.span, Span::new(26, 38));
}

// ------------------------------------------------------------ actions

#[test]
fn call_arguments_bare_or_named() {
    let source = in_step("call book(hotel, guests: guests + 1) -> booking_id");
    let program = check(&source);
    let step = only_step(&program);
    let [Action { kind: ActionKind::Call(call), span }] = step.actions.as_slice() else { panic!("one call") };
    assert_eq!(slice(&source, *span), "call book(hotel, guests: guests + 1) -> booking_id");
    assert_eq!(call.span, *span);
    let hotel = &call.args[0];
    assert_eq!(slice(&source, hotel.name.span), "hotel");
    assert_eq!(hotel.value.span, hotel.name.span);
    let ExprKind::Path { segments } = &hotel.value.kind else { panic!("a bare argument is a path") };
    assert_eq!(names(segments), ["hotel"]);
    assert_eq!(slice(&source, call.args[1].value.span), "guests + 1");
    assert_eq!(call.save.as_ref().map(|save| slice(&source, save.span)), Some("booking_id"));
    let program = check(&in_step("call ping()"));
    let [Action { kind: ActionKind::Call(call), .. }] = only_step(&program).actions.as_slice() else {
        panic!("one call")
    };
    assert!(call.args.is_empty() && call.save.is_none());
}

#[test]
fn for_each_with_a_filter_and_nested_actions() {
    let source = in_step(
        r#"do {
                for c in contacts where c.email is set {
                    call notify(to: c.email)
                    for t in c.tags { say "{{ t }}" }
                }
            }"#,
    );
    let program = check(&source);
    let [Action { kind: ActionKind::ForEach(for_each), .. }] = only_step(&program).actions.as_slice() else {
        panic!("one for")
    };
    assert_eq!(slice(&source, for_each.binding.span), "c");
    assert_eq!(slice(&source, for_each.items.span), "contacts");
    assert_eq!(for_each.filter.as_ref().map(|filter| slice(&source, filter.span)), Some("c.email is set"));
    assert_eq!(for_each.actions.len(), 2);
    assert!(matches!(&for_each.actions[1].kind, ActionKind::ForEach(inner) if inner.filter.is_none()));
}

#[test]
fn emit_takes_a_clause_or_a_block() {
    let source = in_step("do { emit goto billing emit { append_prompt \"x\" halt } }");
    let program = check(&source);
    let actions = &only_step(&program).actions;
    let kinds: Vec<(bool, bool)> = actions
        .iter()
        .map(|action| match &action.kind {
            ActionKind::Emit(directive) => (directive.goto.is_some(), directive.halt.is_some()),
            _ => (false, false),
        })
        .collect();
    assert_eq!(kinds, [(true, false), (false, true)]);
    assert_eq!(slice(&source, actions[0].span), "emit goto billing");
}

// ------------------------------------------------------------ lexical

#[test]
fn comments_and_escapes() {
    let source = "# leading\nflow f { # after a brace\n step s { say \"a \\\"quoted\\\" \\{{ not }}\" } }";
    let program = check(source);
    let say = only_step(&program).say.as_ref().expect("say");
    assert_eq!(template(source, say), "a \"quoted\" {{ not }}");
}

#[test]
fn a_template_error_points_inside_the_string() {
    let source = in_step("say \"Hi {{ name == }}\"");
    let error = one_error(&source);
    assert_eq!(error.code, Code::Syntax);
    assert_eq!(error.message, "expected an expression, found `}`");
}

// ------------------------------------------------------------ syntax errors

#[test]
fn a_syntax_error_names_what_was_expected_and_points_at_the_word() {
    let source = "flow f {\n  step a {\n    colect hotel\n  }\n}\n";
    let error = one_error(source);
    assert_eq!(error.code, Code::Syntax);
    assert_eq!(
        error.message,
        "expected a step clause (`prompt`, `say`, `collect`, `requires`, `next`, `branch`, `do`, …) or `}`, \
             found `colect`"
    );
    assert_eq!(error.primary_span(), Some(Span::new(24, 30)));
    assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("colect"));
}

#[test]
fn a_clause_repeated_many_times_is_reported_once() {
    let (_, diagnostics) = parse_text(&format!("schema {{ company: string {} }}", "\"\"".repeat(1_000)));
    let messages: Vec<&str> = diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect();
    assert_eq!(messages, ["`description` is given twice in this type"]);
}

#[test]
fn a_misspelt_keyword_gets_a_did_you_mean() {
    for (source, keyword) in [
        ("flow f {\n  step a {\n    colect hotel\n  }\n}\n", "collect"),
        ("shema { a: string }\nflow f { step a { } }", "schema"),
    ] {
        let error = one_error(source);
        assert_eq!(error.help.as_deref(), Some(format!("did you mean `{keyword}`?").as_str()), "for {source}");
    }
}

#[test]
fn an_unclosed_brace_is_reported_at_the_brace() {
    let source = "flow support { when \"help\"\n  step ask { say \"a\"\n  step b { say \"b\" }\n}\n";
    let error = one_error(source);
    assert_eq!(error.message, "a `{` is never closed");
    let spans: Vec<(usize, &str)> =
        error.labels.iter().map(|label| (label.span.start as usize, slice(source, label.span))).collect();
    let step_ask_brace = source.find("ask {").map(|at| at + 4);
    assert_eq!(spans.first().map(|(at, _)| Some(*at)), Some(step_ask_brace));
    assert_eq!(spans.get(1).map(|(_, text)| *text), Some("step"), "where the parser gave up");
    // At the end of the file: the innermost brace still open there.
    let error = one_error("flow f { default\n  step a { say \"x\" }\n");
    assert_eq!(error.primary_span().map(|span| span.start), Some(7));
}

#[test]
fn a_misplaced_clause_in_balanced_braces_is_not_blamed_on_a_brace() {
    let error = one_error("flow f { step a { } colect x }");
    assert!(error.message.starts_with("expected a `step`"), "{}", error.message);
}

#[test]
fn missing_punctuation_is_named() {
    let cases = [
        ("flow f \"Title\" step a { }", "expected `{`, found `step`"),
        ("flow f { step a { branch { when \"x\" b } } }", "expected `,` or `->`, found `b`"),
        ("schema { a string }", "expected `:`, found `string`"),
        ("flwo f { }", "expected `agent`, `schema`, `context`, `tool`, `signal` or `flow`, found `flwo`"),
        ("flow f { step a { prompt Which } }", "expected a quoted string, found `Which`"),
        ("flow f { step a { prompt \"open } }", "expected the closing quote of the string, found end of input"),
        ("flow f { step a { wait 2 } }", "expected a duration unit (`ms`, `s`, `m`, `h` or `d`), found a space"),
        ("flow f { step a { call t(a: 1 } }", "expected an operator, `)` or `,`, found `}`"),
        (
            "flow f { step a { do { sat x = 1 } } }",
            "expected an action (`set`, `call`, `emit`, `for`, `say`) or `}`, found `sat`",
        ),
    ];
    for (source, message) in cases {
        assert_eq!(one_error(source).message, message, "for {source}");
    }
}

/// YAML expressions report through `describe_rule` (no detailed re-parse):
/// an operand's many starting rules read as one "expression".
#[test]
fn expression_errors_outside_flow_files_name_an_expression() {
    let mut diagnostics = Vec::new();
    expr::parse_expr("guests == ", SpanMap::Exact { base: 0 }, &mut diagnostics);
    assert_eq!(
        diagnostics.iter().map(|diagnostic| diagnostic.message.as_str()).collect::<Vec<_>>(),
        ["expected an expression, found end of input"]
    );
    diagnostics.clear();
    expr::parse_expr("guests guests", SpanMap::Exact { base: 0 }, &mut diagnostics);
    assert_eq!(
        diagnostics.first().map(|diagnostic| diagnostic.message.as_str()),
        Some("expected `is`, an operator or end of input, found `g`")
    );
}

#[test]
fn deep_nesting_is_refused_before_parsing() {
    let source = format!("flow f {{ step s {{ if {}1{} }} }}", "(".repeat(200), ")".repeat(200));
    let error = one_error(&source);
    assert_eq!(error.message, "nesting is too deep");
    let blocks = format!("flow f {{ step s {{ do {{ {} }} }} }}", "for c in l { ".repeat(100) + &"}".repeat(100));
    assert_eq!(one_error(&blocks).message, "nesting is too deep");
}

#[test]
fn deep_nesting_inside_a_template_is_refused() {
    let source = format!("flow f {{ step s {{ say \"{{{{ {}1{} }}}}\" }} }}", "(".repeat(5000), ")".repeat(5000));
    let (program, diagnostics) = parse_text(&source);
    assert!(diagnostics.iter().any(|diagnostic| diagnostic.message == "nesting is too deep"), "{diagnostics:?}");
    assert!(program.flows.len() <= 1);
}

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

#[test]
fn nesting_up_to_the_limit_parses() {
    let depth = MAX_EXPR_DEPTH - 4;
    let source = format!("flow f {{ step s {{ if {}1{} }} }}", "(".repeat(depth), ")".repeat(depth));
    with_main_thread_stack(|| check(&source));
}

// ------------------------------------------------------------ robustness

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// One edit of a valid program.
    #[derive(Clone, Debug)]
    enum Mutation {
        Delete { at: usize, length: usize },
        Duplicate { at: usize, length: usize },
        Insert { at: usize, piece: &'static str },
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        let position = 0..BOOKING.len();
        prop_oneof![
            (position.clone(), 1usize..40).prop_map(|(at, length)| Mutation::Delete { at, length }),
            (position.clone(), 1usize..80).prop_map(|(at, length)| Mutation::Duplicate { at, length }),
            (
                position,
                prop::sample::select(vec!["{", "}", "\"", "'", "->", "#", "{{", "}}", "(", ")", ",", "\\", " ", "é"])
            )
                .prop_map(|(at, piece)| Mutation::Insert { at, piece }),
        ]
    }

    fn floor_boundary(text: &str, mut at: usize) -> usize {
        at = at.min(text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    }

    fn apply(text: &mut String, mutation: &Mutation) {
        match *mutation {
            Mutation::Delete { at, length } => {
                let start = floor_boundary(text, at);
                let end = floor_boundary(text, start + length);
                text.replace_range(start..end, "");
            }
            Mutation::Duplicate { at, length } => {
                let start = floor_boundary(text, at);
                let end = floor_boundary(text, start + length);
                let copy = text[start..end].to_string();
                text.insert_str(end, &copy);
            }
            Mutation::Insert { at, piece } => {
                let at = floor_boundary(text, at);
                text.insert_str(at, piece);
            }
        }
    }

    fn parses_without_panicking(source: &str) {
        let (_, diagnostics) = with_main_thread_stack(|| parse_text(source));
        for diagnostic in &diagnostics {
            for label in &diagnostic.labels {
                assert!(label.span.start <= label.span.end, "{diagnostic:?}");
                assert!(label.span.end as usize <= source.len(), "{diagnostic:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

        #[test]
        fn mutated_programs_never_panic(mutations in prop::collection::vec(mutation(), 1..6)) {
            let mut source = BOOKING.to_string();
            for mutation in &mutations {
                apply(&mut source, mutation);
            }
            parses_without_panicking(&source);
        }

        #[test]
        fn random_text_never_panics(source in "[a-z_ {}()\\[\\]\"'#:,.=<>\\-+0-9\n]{0,200}") {
            parses_without_panicking(&source);
        }

        #[test]
        fn arbitrary_strings_never_panic(source in any::<String>()) {
            parses_without_panicking(&source);
        }
    }
}
