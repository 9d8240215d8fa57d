//! Tests of the YAML front end as a whole: text in, AST and diagnostics out.

use crate::diag::{Code, Diagnostic};
use crate::source::{SourceFile, Span};
use crate::syntax::ast::{
    ActionKind, BodyValue, Directive, ExprKind, Number, OnError, Program, Template, TemplatePart, Then, ToolImpl,
};
use crate::syntax::expr::tests::shape;
use std::time::{Duration, Instant};

fn parse(text: &str) -> (Program, Vec<Diagnostic>) {
    crate::syntax::parse(&SourceFile::new("test.yaml", text))
}

fn parse_clean(text: &str) -> Program {
    let (program, diagnostics) = parse(text);
    assert!(diagnostics.is_empty(), "unexpected diagnostics: {diagnostics:#?}");
    program
}

fn only_diagnostic(text: &str) -> Diagnostic {
    let (_, diagnostics) = parse(text);
    assert_eq!(diagnostics.len(), 1, "expected one diagnostic: {diagnostics:#?}");
    diagnostics.into_iter().next().expect("one diagnostic")
}

/// The span of the `occurrence`-th (from 0) appearance of `needle`.
fn span_of(text: &str, needle: &str, occurrence: usize) -> Span {
    let start = text.match_indices(needle).nth(occurrence).map(|(start, _)| start).expect("needle in text");
    Span::from_range(start..start + needle.len())
}

/// The span of a mapping key written `needle` (white space, the key, `:`).
fn key_span(text: &str, needle: &str, occurrence: usize) -> Span {
    let span = span_of(text, needle, occurrence);
    let indentation = needle.len() - needle.trim_start().len();
    Span::from_range(span.start as usize + indentation..span.end as usize - 1)
}

fn template_shape(template: &Template) -> String {
    template
        .parts
        .iter()
        .map(|part| match part {
            TemplatePart::Text(text) => text.clone(),
            TemplatePart::Expr(expr) => format!("{{{}}}", shape(expr)),
        })
        .collect()
}

/// A program with one flow `f` whose only step holds `step_body` (indented
/// as the keys of a step).
fn one_step(step_body: &str) -> String {
    format!("flows:\n  f:\n    steps:\n      - id: s\n{step_body}")
}

fn directive_of(program: &Program) -> &Directive {
    match &program.flows[0].steps[0].actions[0].kind {
        ActionKind::Emit(directive) => directive,
        other => panic!("not an emit: {other:?}"),
    }
}

const BOOKING: &str = r#"# Book a hotel room.
agent:
  name: Concierge
  identity: You are the concierge of the Grand Hotel group.
  rules:
    - Never promise a room before the booking tool confirms it.
  limits:
    max_auto_steps: 10
    turn_timeout: 60s

schema:
  hotel: { type: string, description: Name of the hotel, examples: [Grand Hotel, Overlook, Ritz Paris] }
  date: { type: date, description: Check-in date }
  guests: { type: int, min: 1, max: 10 }
  confirmed: bool
  booking_id: string

tools:
  book_hotel:
    description: Reserve a room and return its booking id.
    params: { hotel: string, date: date, guests: int }
    returns: { booking_id: string }
    exec: { command: [python3, tools/book_hotel.py], timeout: 10s }

flows:
  booking:
    title: Book a hotel room
    when: the user wants to book a hotel room
    requires: [hotel, date, guests]
    steps:
      - id: ask_hotel
        prompt: Which hotel would you like to book?
        collect: [hotel]
      - id: ask_date
        prompt: For which date?
        collect: [date]
      - id: ask_guests
        prompt: How many guests?
        collect: [guests]
      - id: confirm
        prompt: "Shall I book {{hotel}} on {{date}} for {{guests}} guests?"
        requires: [hotel, date, guests]
        collect: [confirmed]
        branches:
          - if: confirmed == true
            then: book
          - when: the user wants to change the date
            then: ask_date
            label: change date
          - then: cancelled
      - id: book
        auto: true
        do:
          - call: { tool: book_hotel, args: { hotel: hotel, date: date, guests: guests }, save: booking_id }
        say: "Booked! Your confirmation number is {{booking_id}}."
        next: end
      - id: cancelled
        say: No problem, nothing was booked.
"#;

/// Every key of the language at least once.
const EVERY_KEY: &str = r#"agent:
  name: Helpdesk
  identity: "You help {{ context.tier }} customers."
  rules: Be brief.
  limits: { max_auto_steps: 5, max_tool_rounds: 3, max_turn_tokens: 20000, turn_timeout: 30s }
schema:
  email: { type: string, description: Account email, pattern: "^[^@]+@[^@]+$", examples: [a@b.c] }
  plan: { type: enum, values: [free, pro] }
  count: { type: int, min: 0, max: 99 }
  contacts: { type: list, items: { type: object, fields: { name: string, email: string } } }
  ok: bool
context:
  tier: { type: enum, values: [basic, gold] }
tools:
  lookup:
    description: Find a customer.
    params: { email: string }
    returns: { name: string }
    http:
      method: GET
      url: "https://example.com/customers?email={{email}}"
      headers: { Accept: application/json }
      body: [1, 2.5, true, null, "{{email}}", { nested: x }]
      timeout: 5s
  clock:
    builtin: now
  script:
    params: {}
    exec: { command: [./run.sh], timeout: 1m }
signals:
  human:
    when: [the user wants a person, the user is angry]
    if: context.tier == "gold"
    phase: both
    behavior: once
    cooldown: 10m
    extract: [email]
    then: { goto: { flow: handoff, data: { ok: false } } }
flows:
  main:
    title: Main
    when: the user needs help
    if: [context.tier is set]
    default: true
    requires: email
    optional: [plan]
    rules: [Stay polite.]
    on_enter: [{ say: Welcome. }]
    on_complete:
      - emit: { append_prompt: [Thank the user.], inject_tools: [clock], halt: false }
    complete: { next: handoff }
    steps:
      - id: ask
        prompt: What is your email?
        collect: [email]
        requires: []
        skip_if: email is set
        when: the user has an account
        if: count < 3
        max_asks: 2
        on_no_answer: { abort: "no email", reply: Bye. }
        tools: [lookup]
        on_enter: [{ set: { count: count + 1 } }]
        prepare: [{ emit: { append_prompt: Ask once. } }]
        finalize: [{ emit: { set_context: { tier: '"basic"' } } }]
        branches:
          - if: [ok == true, count > 1]
            when: [the user agrees]
            then: { goto_step: { flow: handoff, step: connect } }
            label: agreed
          - then: work
      - id: work
        auto: true
        on_error: { retry: 2, backoff: 1s }
        wait: 1h
        do:
          - call: { tool: lookup, args: { email: email }, save: contacts }
          - for_each: { in: contacts, as: c, where: c.email is set, do: [{ say: "Hi {{c.name}}" }] }
          - emit: { complete: { next: handoff }, reset: true, goto: main, goto_step: ask }
        next: end
  handoff:
    steps:
      - id: connect
        say: Connecting you now.
"#;

#[test]
fn every_key_reads_clean() {
    let program = parse_clean(EVERY_KEY);
    assert_eq!(program.tools.len(), 3);
    assert_eq!(program.flows.len(), 2);
    let main = &program.flows[0];
    assert_eq!(main.on_enter.len(), 1);
    assert_eq!(main.on_complete.len(), 1);
    let ask = &main.steps[0];
    assert_eq!(ask.max_asks.as_ref().map(|max| max.value), Some(2));
    assert!(ask.on_no_answer.as_ref().is_some_and(|directive| directive.abort.is_some() && directive.reply.is_some()));
    assert_eq!((ask.on_enter.len(), ask.prepare.len(), ask.finalize.len()), (1, 1, 1));
    let work = &main.steps[1];
    assert_eq!(work.wait.as_ref().map(|wait| wait.value.as_str()), Some("1h"));
    assert_eq!(work.actions.len(), 3);
    let ActionKind::Emit(emitted) = &work.actions[2].kind else { panic!() };
    assert!(emitted.complete.is_some() && emitted.goto.is_some() && emitted.goto_step.is_some());
}

#[test]
fn booking_example_reads_into_the_expected_ast() {
    let program = parse_clean(BOOKING);

    let agent = program.agent.as_ref().expect("agent");
    assert_eq!(agent.name.as_ref().map(|name| name.value.as_str()), Some("Concierge"));
    assert_eq!(agent.rules.len(), 1);
    assert_eq!(agent.limits.max_auto_steps.as_ref().map(|limit| limit.value), Some(10));
    assert_eq!(agent.limits.turn_timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("60s"));

    let field_names: Vec<&str> = program.schema.iter().map(|field| field.name.value.as_str()).collect();
    assert_eq!(field_names, ["hotel", "date", "guests", "confirmed", "booking_id"]);
    let hotel = &program.schema[0];
    assert_eq!(hotel.name.span, key_span(BOOKING, "hotel:", 0));
    assert_eq!(hotel.span.start, hotel.name.span.start);
    assert_eq!(hotel.span.end, span_of(BOOKING, "Ritz Paris] }", 0).end);
    assert_eq!(hotel.ty.name.value, "string");
    let examples: Vec<&str> = hotel.ty.examples.iter().map(|example| example.value.as_str()).collect();
    assert_eq!(examples, ["Grand Hotel", "Overlook", "Ritz Paris"]);
    let guests = &program.schema[2];
    assert_eq!(guests.ty.min.as_ref().map(|min| min.value), Some(Number::Int(1)));
    assert_eq!(guests.ty.max.as_ref().map(|max| max.value), Some(Number::Int(10)));
    assert_eq!(program.schema[3].ty.name.value, "bool");
    assert_eq!(program.schema[3].ty.name.span, span_of(BOOKING, "bool", 0));

    let tool = &program.tools[0];
    assert_eq!(tool.name.value, "book_hotel");
    assert_eq!(tool.params.len(), 3);
    assert_eq!(tool.returns.as_ref().map(|returns| returns.value.len()), Some(1));
    let [ToolImpl::Exec(exec)] = tool.implementations.as_slice() else {
        panic!("one exec implementation: {:?}", tool.implementations)
    };
    let command: Vec<&str> = exec.command.iter().map(|part| part.value.as_str()).collect();
    assert_eq!(command, ["python3", "tools/book_hotel.py"]);
    assert_eq!(exec.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("10s"));

    let flow = &program.flows[0];
    assert_eq!(flow.name.value, "booking");
    assert_eq!(flow.name.span, key_span(BOOKING, "booking:", 0));
    assert_eq!(flow.span.start, flow.name.span.start);
    assert_eq!(flow.when[0].value, "the user wants to book a hotel room");
    let requires: Vec<&str> = flow.requires.iter().map(|name| name.value.as_str()).collect();
    assert_eq!(requires, ["hotel", "date", "guests"]);
    let step_ids: Vec<&str> =
        flow.steps.iter().map(|step| step.id.as_ref().map_or("", |id| id.value.as_str())).collect();
    assert_eq!(step_ids, ["ask_hotel", "ask_date", "ask_guests", "confirm", "book", "cancelled"]);
    let collected = span_of(BOOKING, "hotel]", 0);
    assert_eq!(flow.steps[0].collect[0].span, Span::new(collected.start, collected.end - 1));

    let confirm = &flow.steps[3];
    assert_eq!(
        template_shape(confirm.prompt.as_ref().expect("prompt")),
        "Shall I book {hotel} on {date} for {guests} guests?"
    );
    let branches = &confirm.branches.as_ref().expect("branches").value;
    assert_eq!(branches.len(), 3);
    assert_eq!(shape(&branches[0].guard[0]), "(confirmed == true)");
    assert_eq!(branches[0].guard[0].span, span_of(BOOKING, "confirmed == true", 0));
    let Some(Then::Target(book)) = &branches[0].then else { panic!("then is a target") };
    assert_eq!(book.value, "book");
    assert_eq!(branches[1].when[0].value, "the user wants to change the date");
    assert_eq!(branches[1].label.as_ref().map(|label| label.value.as_str()), Some("change date"));
    assert!(branches[2].guard.is_empty() && branches[2].when.is_empty());

    let book_step = &flow.steps[4];
    assert_eq!(book_step.auto.as_ref().map(|auto| auto.value), Some(true));
    assert_eq!(book_step.next.as_ref().map(|next| next.value.as_str()), Some("end"));
    let ActionKind::Call(call) = &book_step.actions[0].kind else { panic!("a call") };
    assert_eq!(call.tool.value, "book_hotel");
    let args: Vec<String> = call.args.iter().map(|arg| format!("{}={}", arg.name.value, shape(&arg.value))).collect();
    assert_eq!(args, ["hotel=hotel", "date=date", "guests=guests"]);
    assert_eq!(call.save.as_ref().map(|save| save.value.as_str()), Some("booking_id"));
    assert_eq!(
        template_shape(book_step.say.as_ref().expect("say")),
        "Booked! Your confirmation number is {booking_id}."
    );
    assert_eq!(template_shape(flow.steps[5].say.as_ref().expect("say")), "No problem, nothing was booked.");
}

#[test]
fn schema_shorthands_and_nested_types() {
    let program = parse_clean(
        "schema:\n  confirmed: bool\n  plan: { type: enum, values: [free, pro] }\n  ratio: { type: float, min: 0.5, max: 2 }\n  contacts: { type: list, items: { type: object, fields: { name: string, email: string } } }\n",
    );
    assert_eq!(program.schema[0].ty.name.value, "bool");
    let values: Vec<&str> =
        program.schema[1].ty.values.as_ref().expect("values").value.iter().map(|value| value.value.as_str()).collect();
    assert_eq!(values, ["free", "pro"]);
    assert_eq!(program.schema[2].ty.min.as_ref().map(|min| min.value), Some(Number::Float(0.5)));
    let items = program.schema[3].ty.items.as_ref().expect("items");
    assert_eq!(items.name.value, "object");
    let members: Vec<&str> =
        items.fields.as_ref().expect("fields").value.iter().map(|field| field.name.value.as_str()).collect();
    assert_eq!(members, ["name", "email"]);
}

#[test]
fn goto_shorthand_and_mapping() {
    let program = parse_clean(&one_step(
        "        do:\n          - emit: { goto: billing }\n          - emit: { goto: { flow: handoff, data: { reason: '\"late\"', count: 2 } } }\n",
    ));
    let actions = &program.flows[0].steps[0].actions;
    let ActionKind::Emit(short) = &actions[0].kind else { panic!() };
    let goto = short.goto.as_ref().expect("goto");
    assert_eq!(goto.flow.as_ref().map(|flow| flow.value.as_str()), Some("billing"));
    assert!(goto.data.is_empty());
    let ActionKind::Emit(long) = &actions[1].kind else { panic!() };
    let goto = long.goto.as_ref().expect("goto");
    assert_eq!(goto.flow.as_ref().map(|flow| flow.value.as_str()), Some("handoff"));
    let data: Vec<String> =
        goto.data.iter().map(|item| format!("{}={}", item.name.value, shape(&item.value))).collect();
    assert_eq!(data, ["reason=\"late\"", "count=2"]);
}

#[test]
fn goto_step_shorthand_and_mapping() {
    let program = parse_clean(&one_step(
        "        do:\n          - emit: { goto_step: ask_date }\n          - emit: { goto_step: { flow: billing, step: ask_order } }\n",
    ));
    let actions = &program.flows[0].steps[0].actions;
    let ActionKind::Emit(short) = &actions[0].kind else { panic!() };
    let goto_step = short.goto_step.as_ref().expect("goto_step");
    assert!(goto_step.flow.is_none());
    assert_eq!(goto_step.step.as_ref().map(|step| step.value.as_str()), Some("ask_date"));
    let ActionKind::Emit(long) = &actions[1].kind else { panic!() };
    let goto_step = long.goto_step.as_ref().expect("goto_step");
    assert_eq!(goto_step.flow.as_ref().map(|flow| flow.value.as_str()), Some("billing"));
    assert_eq!(goto_step.step.as_ref().map(|step| step.value.as_str()), Some("ask_order"));
}

#[test]
fn complete_true_false_and_next() {
    let program = parse_clean(&one_step(
        "        do:\n          - emit: { complete: true }\n          - emit: { complete: false }\n          - emit: { complete: { next: survey } }\n",
    ));
    let actions = &program.flows[0].steps[0].actions;
    let emitted = |index: usize| match &actions[index].kind {
        ActionKind::Emit(directive) => directive.clone(),
        other => panic!("not an emit: {other:?}"),
    };
    assert!(emitted(0).complete.as_ref().is_some_and(|complete| complete.next.is_none()));
    assert!(emitted(1).complete.is_none());
    assert_eq!(
        emitted(2).complete.and_then(|complete| complete.next).map(|next| next.value),
        Some("survey".to_string())
    );
}

#[test]
fn abort_true_or_reason_template() {
    let program = parse_clean(&one_step(
        "        on_no_answer: { abort: true }\n        do:\n          - emit: { abort: \"no answer from {{ name }}\", reset: false, halt: true }\n",
    ));
    let step = &program.flows[0].steps[0];
    let on_no_answer = step.on_no_answer.as_ref().expect("on_no_answer");
    assert!(on_no_answer.abort.as_ref().is_some_and(|abort| abort.reason.is_none()));
    let directive = directive_of(&program);
    let reason = directive.abort.as_ref().and_then(|abort| abort.reason.as_ref()).expect("reason");
    assert_eq!(template_shape(reason), "no answer from {name}");
    assert_eq!(directive.reset.as_ref().map(|reset| reset.value), Some(false));
    assert_eq!(directive.halt.as_ref().map(|halt| halt.value), Some(true));
}

#[test]
fn directive_writes_and_augmentations() {
    let text = one_step(
        "        do:\n          - emit:\n              reply: \"Hi {{name}}\"\n              set: { plan: '\"pro\"' }\n              set_context: { tier: '\"gold\"' }\n              append_prompt: Be brief.\n              inject_tools: lookup\n",
    );
    let program = parse_clean(&text);
    let directive = directive_of(&program);
    assert_eq!(template_shape(directive.reply.as_ref().expect("reply")), "Hi {name}");
    assert_eq!(shape(&directive.set[0].value), "\"pro\"");
    assert_eq!(directive.set_context[0].name.value, "tier");
    assert_eq!(directive.append_prompt.len(), 1);
    assert_eq!(directive.inject_tools[0].value, "lookup");
}

#[test]
fn conditions_as_a_string_or_a_list() {
    let text = "flows:\n  f:\n    when: [the user is lost, the user asks for help]\n    if: context.tier is set\n    steps:\n      - id: s\n        if: [a > 1, b]\n        when: the user agrees\n        branches:\n          - if: x\n            when: [y, z]\n            then: s\n";
    let program = parse_clean(text);
    let flow = &program.flows[0];
    assert_eq!(flow.when.len(), 2);
    assert_eq!(shape(&flow.guard[0]), "(context.tier is set)");
    let step = &flow.steps[0];
    let guards: Vec<String> = step.guard.iter().map(shape).collect();
    assert_eq!(guards, ["(a > 1)", "b"]);
    assert_eq!(step.when[0].value, "the user agrees");
    let branch = &step.branches.as_ref().expect("branches").value[0];
    assert_eq!(shape(&branch.guard[0]), "x");
    assert_eq!(branch.when.len(), 2);
}

#[test]
fn then_as_a_name_or_a_directive() {
    let text = "signals:\n  wants_human:\n    when: the user asks for a human\n    if: context.tier == \"gold\"\n    phase: pre\n    behavior: cooldown\n    cooldown: 10m\n    extract: reason\n    then: { goto: handoff }\n  other:\n    when: x\n    then: handoff\n";
    let program = parse_clean(text);
    let signal = &program.signals[0];
    assert_eq!(shape(&signal.guard[0]), "(context.tier == \"gold\")");
    assert_eq!(signal.phase.as_ref().map(|phase| phase.value.as_str()), Some("pre"));
    assert_eq!(signal.cooldown.as_ref().map(|cooldown| cooldown.value.as_str()), Some("10m"));
    assert_eq!(signal.extract[0].value, "reason");
    let Some(Then::Directive(directive)) = &signal.then else { panic!() };
    assert!(directive.goto.is_some());
    let Some(Then::Target(target)) = &program.signals[1].then else { panic!() };
    assert_eq!(target.value, "handoff");
    assert_eq!(target.span, span_of(text, "handoff", 1));
}

#[test]
fn on_error_forms() {
    let text = "flows:\n  w:\n    steps:\n      - id: a\n        on_error: stop\n      - id: b\n        on_error: continue\n      - id: c\n        on_error: { retry: 3, backoff: 2s }\n";
    let program = parse_clean(text);
    let steps = &program.flows[0].steps;
    assert!(matches!(steps[0].on_error, Some(OnError::Stop(_))));
    assert!(matches!(steps[1].on_error, Some(OnError::Continue(_))));
    let Some(OnError::Retry { times, backoff, .. }) = &steps[2].on_error else { panic!() };
    assert_eq!(times.value, 3);
    assert_eq!(backoff.as_ref().map(|backoff| backoff.value.as_str()), Some("2s"));
}

#[test]
fn tool_implementations_in_every_form() {
    let text = r#"tools:
  a:
    exec: [./tools/a.sh, --fast, 10]
  b:
    exec: ./tools/b.sh
  c:
    builtin: now
  d:
    params: {}
    http:
      method: POST
      url: "http://127.0.0.1:8080/bookings/{{id}}"
      headers: { Authorization: "Bearer {{ env.TOKEN }}" }
      body: { hotel: "{{hotel}}", guests: 2, vip: true, note: null, tags: [a, "{{tag}}"] }
      timeout: 10
"#;
    let program = parse_clean(text);
    let [ToolImpl::Exec(exec)] = program.tools[0].implementations.as_slice() else { panic!() };
    let command: Vec<&str> = exec.command.iter().map(|part| part.value.as_str()).collect();
    assert_eq!(command, ["./tools/a.sh", "--fast", "10"]);
    let [ToolImpl::Exec(exec)] = program.tools[1].implementations.as_slice() else { panic!() };
    assert_eq!(exec.command[0].value, "./tools/b.sh");
    let [ToolImpl::Builtin { name, .. }] = program.tools[2].implementations.as_slice() else { panic!() };
    assert_eq!(name.value, "now");
    let [ToolImpl::Http(http)] = program.tools[3].implementations.as_slice() else { panic!() };
    assert_eq!(http.method.value, "POST");
    assert_eq!(template_shape(&http.url), "http://127.0.0.1:8080/bookings/{id}");
    assert_eq!(http.headers[0].0.value, "Authorization");
    assert_eq!(template_shape(&http.headers[0].1), "Bearer {env.TOKEN}");
    // A bare number stays text, so lowering can say the unit is missing.
    assert_eq!(http.timeout.as_ref().map(|timeout| timeout.value.as_str()), Some("10"));
    let Some(BodyValue::Object(body)) = &http.body else { panic!() };
    let kinds: Vec<String> = body
        .value
        .iter()
        .map(|(name, value)| {
            let kind = match value {
                BodyValue::Null(_) => "null".to_string(),
                BodyValue::Bool(value) => value.value.to_string(),
                BodyValue::Number(number) => format!("{:?}", number.value),
                BodyValue::String(template) => template_shape(template),
                BodyValue::List(items) => format!("list of {}", items.value.len()),
                BodyValue::Object(_) => "object".to_string(),
            };
            format!("{}={kind}", name.value)
        })
        .collect();
    assert_eq!(kinds, ["hotel={hotel}", "guests=Int(2)", "vip=true", "note=null", "tags=list of 2"]);
}

#[test]
fn name_lists_and_rules_take_a_single_string() {
    let text = "flows:\n  f:\n    rules: Keep answers short.\n    requires: hotel\n    optional: [plan]\n    default: true\n    complete: { next: survey }\n    steps:\n      - id: s\n        collect: hotel\n        tools: lookup\n";
    let program = parse_clean(text);
    let flow = &program.flows[0];
    assert_eq!(template_shape(&flow.rules[0]), "Keep answers short.");
    assert_eq!(flow.requires[0].value, "hotel");
    assert_eq!(flow.optional[0].value, "plan");
    assert_eq!(flow.default.as_ref().map(|default| default.value), Some(true));
    assert_eq!(flow.complete_next.as_ref().map(|next| next.value.as_str()), Some("survey"));
    assert_eq!(flow.complete_next.as_ref().map(|next| next.span), Some(span_of(text, "survey", 0)));
    assert_eq!(flow.steps[0].collect[0].value, "hotel");
    assert_eq!(flow.steps[0].tools[0].value, "lookup");
}

#[test]
fn a_step_without_id_is_kept_with_no_id() {
    let program = parse_clean("flows:\n  f:\n    steps:\n      - say: hello\n");
    assert!(program.flows[0].steps[0].id.is_none());
    assert!(program.flows[0].steps[0].say.is_some());
}

#[test]
fn set_values_are_expressions_and_literals() {
    let program = parse_clean(&one_step(
        "        do:\n          - set: { name: Bob, quoted: '\"Bob\"', guests: 2, ok: true, gone: ~, ratio: 1.5, plans: [1, 2], sum: a + 1 }\n",
    ));
    let ActionKind::Set(assignments) = &program.flows[0].steps[0].actions[0].kind else { panic!() };
    let shapes: Vec<String> = assignments
        .iter()
        .map(|assignment| format!("{}={}", assignment.name.value, shape(&assignment.value)))
        .collect();
    assert_eq!(
        shapes,
        ["name=Bob", "quoted=\"Bob\"", "guests=2", "ok=true", "gone=null", "ratio=1.5", "plans=[1, 2]", "sum=(a + 1)"]
    );
}

#[test]
fn for_each_with_filter_and_nested_actions() {
    let text = one_step(
        "        do:\n          - for_each:\n              in: contacts\n              as: c\n              where: c.email is set\n              do:\n                - say: \"Hi {{c.name}}\"\n                - call: { tool: send, args: { to: c.email } }\n",
    );
    let program = parse_clean(&text);
    let ActionKind::ForEach(for_each) = &program.flows[0].steps[0].actions[0].kind else { panic!() };
    assert_eq!(shape(&for_each.items), "contacts");
    assert_eq!(for_each.binding.value, "c");
    assert_eq!(for_each.filter.as_ref().map(shape).as_deref(), Some("(c.email is set)"));
    assert_eq!(for_each.actions.len(), 2);
    assert!(matches!(for_each.actions[1].kind, ActionKind::Call(_)));
}

#[test]
fn append_maps_lists_to_items() {
    let text = one_step(
        "        do:\n          - for_each:\n              in: contacts\n              as: c\n              do:\n                - append: { welcomed: c.email, seen: c }\n",
    );
    let program = parse_clean(&text);
    let ActionKind::ForEach(for_each) = &program.flows[0].steps[0].actions[0].kind else { panic!() };
    let [crate::syntax::ast::Action { kind: ActionKind::Append(appends), .. }] = for_each.actions.as_slice() else {
        panic!("one append")
    };
    let pairs: Vec<String> =
        appends.iter().map(|append| format!("{}={}", append.name.value, shape(&append.value))).collect();
    assert_eq!(pairs, ["welcomed=c.email", "seen=c"]);
}

#[test]
fn unknown_key_suggests_the_closest_key() {
    let text = one_step("        colect: [hotel]\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.code, Code::UnknownKey);
    assert_eq!(diagnostic.message, "unknown key `colect` in a step");
    assert_eq!(diagnostic.primary_span(), Some(span_of(&text, "colect", 0)));
    assert_eq!(diagnostic.help.as_deref(), Some("did you mean `collect`?"));
}

#[test]
fn unknown_key_far_from_any_lists_the_allowed_keys() {
    let diagnostic = only_diagnostic("agent:\n  zzzzzz: 1\n");
    assert_eq!(diagnostic.code, Code::UnknownKey);
    assert_eq!(diagnostic.help.as_deref(), Some("the agent takes `name`, `identity`, `rules`, `limits` or `history`"));
}

#[test]
fn unknown_action_key_suggests_the_closest_action() {
    let text = one_step("        do:\n          - sey: hello\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.code, Code::UnknownKey);
    assert_eq!(diagnostic.help.as_deref(), Some("did you mean `say`?"));
}

#[test]
fn duplicate_key_points_at_the_second_use() {
    let text = one_step("        prompt: first\n        prompt: second\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.code, Code::DuplicateKey);
    assert_eq!(diagnostic.primary_span(), Some(span_of(&text, "prompt", 1)));
    assert_eq!(diagnostic.labels[1].span, span_of(&text, "prompt", 0));
    assert_eq!(diagnostic.labels[1].text, "first used here");
    let (program, _) = parse(&text);
    let prompt = program.flows[0].steps[0].prompt.as_ref().expect("prompt");
    assert_eq!(template_shape(prompt), "first");
}

#[test]
fn duplicate_key_in_free_mappings() {
    let text = one_step("        do:\n          - set: { a: 1, a: 2 }\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.code, Code::DuplicateKey);
    assert_eq!(diagnostic.primary_span(), Some(key_span(&text, "a:", 1)));
}

#[test]
fn duplicate_ids_are_kept_for_lowering() {
    let text = "schema:\n  x: int\n  x: string\nflows:\n  a:\n    steps: [{ id: s }]\n  a:\n    steps: [{ id: t }]\n";
    let program = parse_clean(text);
    assert_eq!(program.schema.len(), 2);
    assert_eq!(program.flows.len(), 2);
    assert_eq!(program.flows[1].name.span, key_span(text, "  a:", 1));
}

#[test]
fn wrong_shapes_are_syntax_errors() {
    let text = one_step("        collect: { hotel: 1 }\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.code, Code::Syntax);
    assert_eq!(diagnostic.message, "expected a list of field names for `collect`, found a mapping");
    assert!(diagnostic.help.is_some());

    let text = one_step("        max_asks: many\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.message, "expected a whole number for `max_asks`, found a text");
    assert_eq!(diagnostic.primary_span(), Some(span_of(&text, "many", 0)));

    let diagnostic = only_diagnostic("signals:\n  s:\n    when: x\n    phase: 3\n");
    assert_eq!(diagnostic.message, "expected a phase for `phase`, found a number");

    let diagnostic = only_diagnostic("flows: [a, b]\n");
    assert_eq!(diagnostic.message, "expected a mapping of ids to flows for `flows`, found a list");

    let text = one_step("        next:\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.message, "expected a step id or `end` for `next`, found nothing");
    assert_eq!(diagnostic.primary_span(), Some(span_of(&text, "next", 0)));
}

#[test]
fn comma_separated_names_ask_for_a_list() {
    let diagnostic = only_diagnostic(&one_step("        collect: hotel, date\n"));
    assert_eq!(diagnostic.message, "expected a list of field names for `collect`, found a text");
    assert_eq!(diagnostic.help.as_deref(), Some("write one name or a list of names, e.g. `collect: [hotel, date]`"));
}

#[test]
fn an_action_holds_one_key() {
    let text = one_step("        do:\n          - say: hi\n            set: { a: 1 }\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.message, "an action holds exactly one key");
    assert_eq!(diagnostic.primary_span(), Some(span_of(&text, "set", 0)));
}

#[test]
fn missing_then_is_reported_and_the_entry_kept() {
    let (program, diagnostics) = parse(&one_step("        branches:\n          - if: x\n"));
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].message, "a branch entry needs `then`");
    let branches = &program.flows[0].steps[0].branches.as_ref().expect("branches").value;
    assert!(branches[0].then.is_none());
}

#[test]
fn expression_error_in_a_quoted_string_points_at_the_exact_byte() {
    let text = one_step("        if: \"guests == == 2\"\n");
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.code, Code::Syntax);
    let second_operator = span_of(&text, "==", 1);
    assert_eq!(diagnostic.primary_span(), Some(Span::new(second_operator.start, second_operator.start + 1)));
}

#[test]
fn expression_spans_inside_single_quotes_and_plain_scalars() {
    let text = one_step("        skip_if: 'guests == \"two\"'\n        if: plan in [pro]\n");
    let program = parse_clean(&text);
    let step = &program.flows[0].steps[0];
    let ExprKind::Binary { right, .. } = &step.skip_if.as_ref().expect("skip_if").kind else { panic!() };
    assert_eq!(right.span, span_of(&text, "\"two\"", 0));
    assert_eq!(step.guard[0].span, span_of(&text, "plan in [pro]", 0));
}

#[test]
fn escaped_or_folded_strings_map_to_the_whole_scalar() {
    let text = one_step("        if: \"a ==\\t1\"\n        skip_if: >\n          b ==\n          2\n");
    let program = parse_clean(&text);
    let step = &program.flows[0].steps[0];
    assert_eq!(step.guard[0].span, span_of(&text, "\"a ==\\t1\"", 0));
    let skip_if = step.skip_if.as_ref().expect("skip_if");
    assert_eq!(shape(skip_if), "(b == 2)");
    assert!(skip_if.span.start >= span_of(&text, "b ==", 0).start);
}

#[test]
fn spans_are_bytes_after_non_ascii_text() {
    let text = "agent:\n  name: Café «Ünïcode»\nflows:\n  f:\n    steps:\n      - id: s\n        if: \"été == 1\"\n";
    let diagnostic = parse(text).1;
    // `été` is a valid name for YAML; the expression parser refuses the
    // accented letters at their exact bytes.
    let expected_start = span_of(text, "été", 0).start;
    assert_eq!(diagnostic.len(), 1, "{diagnostic:#?}");
    assert_eq!(diagnostic[0].primary_span().map(|span| span.start), Some(expected_start));
    let program = parse("agent:\n  name: Café\nflows:\n  f: { steps: [{ id: s, if: ok }] }\n").0;
    let text = "agent:\n  name: Café\nflows:\n  f: { steps: [{ id: s, if: ok }] }\n";
    assert_eq!(program.flows[0].steps[0].guard[0].span, span_of(text, "ok", 0));
}

#[test]
fn a_byte_order_mark_is_skipped_and_spans_stay_bytes() {
    let text = "\u{feff}flows:\n  f:\n    steps: [{ id: s, if: ok }]\n";
    let program = parse_clean(text);
    assert_eq!(program.flows[0].name.span, key_span(text, "f:", 0));
    assert_eq!(program.flows[0].steps[0].guard[0].span, span_of(text, "ok", 0));
}

#[test]
fn aliases_are_expanded() {
    let text = "schema:\n  a: &money { type: float, min: 0 }\n  b: *money\n";
    let program = parse_clean(text);
    assert_eq!(program.schema[1].ty.name.value, "float");
    assert_eq!(program.schema[1].ty.min.as_ref().map(|min| min.value), Some(Number::Int(0)));
}

#[test]
fn tab_indentation_is_refused() {
    let text = "flows:\n\tf:\n    steps: []\n";
    let diagnostic = only_diagnostic(text);
    assert_eq!(diagnostic.message, "YAML indentation must use spaces, not tabs");
    assert_eq!(diagnostic.primary_span(), Some(Span::new(7, 8)));

    let text = "agent:\n  name: x\n  \tidentity: y\n";
    let diagnostic = only_diagnostic(text);
    assert_eq!(diagnostic.message, "YAML indentation must use spaces, not tabs");
    assert_eq!(diagnostic.primary_span(), Some(span_of(text, "\t", 0)));
}

#[test]
fn tabs_inside_block_text_are_content() {
    let program = parse_clean("agent:\n  identity: |\n    Use\n      \tthis table.\n");
    let identity = program.agent.and_then(|agent| agent.identity).expect("identity");
    assert_eq!(template_shape(&identity), "Use\n  \tthis table.\n");
}

#[test]
fn billion_laughs_is_refused_quickly() {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..12 {
        let previous = format!("*a{}", level - 1);
        let items = [previous.as_str(); 10].join(", ");
        text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    let started = Instant::now();
    let (program, diagnostics) = parse(&text);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(program.flows.is_empty());
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert_eq!(diagnostics[0].message, "aliases expand to more than 100000 nodes");
}

#[test]
fn ten_thousand_nested_lists_are_refused() {
    let text = format!("flows: {}\n", "[".repeat(10_000));
    let diagnostic = only_diagnostic(&text);
    assert_eq!(diagnostic.message, "YAML nesting is deeper than 128 levels");
    let text = format!("{}\n", "- ".repeat(10_000));
    assert_eq!(only_diagnostic(&text).message, "YAML nesting is deeper than 128 levels");
}

#[test]
fn nesting_just_under_the_limit_builds() {
    let body = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    let tools = format!("tools:\n  t:\n    http: {{ method: POST, url: u, body: {body} }}\n");
    parse_clean(&tools);

    let mut for_each = String::from("{ say: hi }");
    for _ in 0..40 {
        for_each = format!("{{ for_each: {{ in: xs, as: x, do: [{for_each}] }} }}");
    }
    parse_clean(&one_step(&format!("        do: [{for_each}]\n")));

    let mut ty = String::from("string");
    for _ in 0..60 {
        ty = format!("{{ type: list, items: {ty} }}");
    }
    parse_clean(&format!("schema:\n  deep: {ty}\n"));

    // Expression lists stop at the expression depth limit, as in strings.
    let list = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let diagnostic = only_diagnostic(&one_step(&format!("        do: [{{ set: {{ x: {list} }} }}]\n")));
    assert_eq!(diagnostic.message, "nesting is too deep");
}

#[test]
fn a_second_document_is_refused() {
    let text = "flows: {}\n---\nflows: {}\n";
    let diagnostic = only_diagnostic(text);
    assert_eq!(diagnostic.message, "the file holds more than one YAML document");
    assert_eq!(diagnostic.primary_span().map(|span| span.start), Some(span_of(text, "---", 0).start));
    // A trailing `---` starts an empty document: nothing is lost.
    parse_clean("flows: {}\n---\n");
}

#[test]
fn yaml_errors_give_one_diagnostic_and_no_program() {
    let text = "flows:\n  f: \"unterminated\n";
    let (program, diagnostics) = parse(text);
    assert!(program.flows.is_empty());
    assert_eq!(diagnostics.len(), 1);
    assert!(diagnostics[0].message.starts_with("invalid YAML: "), "{}", diagnostics[0].message);
    assert!(diagnostics[0].help.is_some());
}

#[test]
fn unknown_anchor_is_named() {
    let diagnostic = only_diagnostic("flows:\n  f: *nowhere\n");
    assert_eq!(diagnostic.message, "unknown anchor `nowhere`");
}

#[test]
fn an_alias_inside_its_own_anchor_is_refused() {
    let diagnostic = only_diagnostic("flows: &loop { f: *loop }\n");
    assert_eq!(diagnostic.message, "an alias refers to the node that contains it");
}

#[test]
fn tags_other_than_core_schema_are_refused() {
    let (_, diagnostics) = parse("agent:\n  name: !secret Concierge\n");
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].message, "unsupported YAML tag `!secret`");
    let program = parse_clean(&one_step("        do:\n          - set: { code: !!str 42 }\n"));
    let ActionKind::Set(assignments) = &program.flows[0].steps[0].actions[0].kind else { panic!() };
    // `!!str` makes the text an expression to parse, as any string.
    assert_eq!(shape(&assignments[0].value), "42");
}

#[test]
fn a_program_must_be_a_mapping() {
    let diagnostic = only_diagnostic("- a\n- b\n");
    assert_eq!(diagnostic.message, "expected a mapping of program sections, found a list");
}

#[test]
fn merge_keys_are_explained() {
    let text = "flows:\n  f:\n    steps:\n      - id: s\n        <<: {}\n";
    let diagnostic = only_diagnostic(text);
    assert_eq!(diagnostic.code, Code::UnknownKey);
    assert_eq!(diagnostic.help.as_deref(), Some("YAML merge keys (`<<`) are not supported: write the keys out"));
}

#[test]
fn empty_sections_and_bodies_are_empty() {
    let program = parse_clean("agent:\nschema:\ntools:\n  t:\nflows:\n  f:\n");
    assert!(program.agent.is_some());
    assert!(program.schema.is_empty());
    assert!(program.tools[0].implementations.is_empty());
    assert!(program.flows[0].steps.is_empty());
}

mod properties;

/// Reads `text` with every flow left in the tree and built afterwards, the
/// way the front end worked before flows were built while reading.
fn parse_whole_tree(text: &str) -> (Program, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let program = match super::tree::read(text, &mut diagnostics, None) {
        Some(tree) => super::build::build(&tree, Vec::new(), &mut diagnostics),
        None => Program::default(),
    };
    (program, diagnostics)
}

/// Both ways of building flows while reading, on one thread and on two,
/// give what building from the whole tree gives.
fn assert_same_as_whole_tree(text: &str) {
    let json = |program: &Program| serde_json::to_string(program).expect("the AST serializes");
    let (whole, mut whole_diagnostics) = parse_whole_tree(text);
    crate::diag::sort_diagnostics(&mut whole_diagnostics);
    for (how, (streamed, mut streamed_diagnostics)) in
        [("in order", super::parse_in_order(text)), ("pipelined", super::parse_pipelined(text))]
    {
        crate::diag::sort_diagnostics(&mut streamed_diagnostics);
        assert_eq!(json(&streamed), json(&whole), "the AST differs, {how}, for:\n{text}");
        assert_eq!(
            format!("{streamed_diagnostics:?}"),
            format!("{whole_diagnostics:?}"),
            "diagnostics differ, {how}, for:\n{text}"
        );
    }
}

#[test]
fn flows_built_while_reading_equal_flows_built_from_the_whole_tree() {
    let examples = ["booking.yaml", "support.yaml"]
        .map(|name| std::fs::read_to_string(format!("{}/flows/{name}", env!("CARGO_MANIFEST_DIR"))).expect("example"));
    for text in examples {
        assert_same_as_whole_tree(&text);
    }
    assert_same_as_whole_tree(&crate::testgen::large_program_yaml(30, 12));
    // Past the size at which `parse` itself builds on a second thread.
    let large = crate::testgen::large_program_yaml(200, 20);
    assert!(large.len() > crate::syntax::PARALLEL_THRESHOLD);
    assert_same_as_whole_tree(&large);
    // Aliases from flows to the schema and to another flow's anchor: those
    // flows are built on the reading thread.
    assert_same_as_whole_tree(
        "schema:\n  name: &text string\nflows:\n  a:\n    steps: [&ask { id: x, prompt: Hi, collect: [name] }]\n  b:\n    title: *text\n    steps: [*ask]\n  c:\n    steps: [{ id: y, say: Yo }]\n",
    );
    // Mistakes inside flows: unknown keys, wrong shapes, bad expressions.
    assert_same_as_whole_tree(
        "flows:\n  a:\n    stpes: []\n    steps:\n      - id: x\n        prompt: 'hi {{ 1 + }}'\n  b: [1]\n  c:\n  7: { steps: 3 }\n",
    );
}

#[test]
fn anchors_keep_their_flow_in_the_tree_for_later_aliases() {
    let text = "flows:\n  a: &shared\n    steps:\n      - id: x\n        say: Hi\n  b: *shared\n  c:\n    steps:\n      - &step { id: y, say: Yo }\n  d:\n    steps: [*step]\n";
    assert_same_as_whole_tree(text);
    let program = parse_clean(text);
    let steps: Vec<Vec<&str>> = program
        .flows
        .iter()
        .map(|flow| flow.steps.iter().filter_map(|step| step.id.as_ref()).map(|id| id.value.as_str()).collect())
        .collect();
    assert_eq!(steps, [["x"], ["x"], ["y"], ["y"]]);
}

#[test]
fn a_repeated_flows_section_is_reported_and_not_built() {
    let text = "flows:\n  a:\n    steps: [{ id: x, say: Hi }]\nflows:\n  b:\n    stpes: []\n";
    assert_same_as_whole_tree(text);
    let (program, diagnostics) = parse(text);
    assert_eq!(program.flows.len(), 1);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert!(diagnostics[0].message.contains("flows"), "{diagnostics:#?}");
}

#[test]
fn a_yaml_error_after_the_flows_drops_what_they_reported() {
    let text = "flows:\n  a:\n    stpes: []\n  b: [unclosed\n";
    let (program, diagnostics) = parse(text);
    assert!(program.flows.is_empty());
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    assert!(diagnostics[0].message.starts_with("invalid YAML"), "{diagnostics:#?}");
}
