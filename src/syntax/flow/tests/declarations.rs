//! The agent, schema, context, tools and signals of `.flow` programs.

use super::*;

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
fn the_limit_message_is_a_text_given_once() {
    let program = check("agent A { limits { turn_timeout 30s message \"Too slow: {{ context.tier }}\" } }");
    let limits = program.agent.expect("agent").limits;
    assert_eq!(limits.message.map(|message| message.parts.len()), Some(2));
    let source = "agent A { limits { message \"a\" message \"b\" } }";
    let error = one_error(source);
    assert_eq!(error.primary_span().map(|span| slice(source, span)), Some("message \"b\""));
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
