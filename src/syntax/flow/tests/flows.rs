//! Flows, steps, directives, actions and lexical details of `.flow` programs.

use super::*;

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
            ActionKind::Append(_) => "append",
            ActionKind::Call(_) => "call",
            ActionKind::Emit(_) => "emit",
            ActionKind::Say(_) => "say",
            ActionKind::ForEach(_) => "for",
            ActionKind::AskModel(_) => "ask_model",
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
fn append_takes_an_item_then_a_list() {
    let source = in_step(
        r#"do {
                for c in contacts where c.email not in welcomed {
                    append c.email to welcomed
                }
                append "to" + "day" to log
            }"#,
    );
    let program = check(&source);
    let [Action { kind: ActionKind::ForEach(for_each), .. }, Action { kind: ActionKind::Append(last), .. }] =
        only_step(&program).actions.as_slice()
    else {
        panic!("a for and an append")
    };
    let [Action { kind: ActionKind::Append(inner), span }] = for_each.actions.as_slice() else {
        panic!("one append in the loop")
    };
    assert_eq!(slice(&source, *span), "append c.email to welcomed");
    assert_eq!(inner.len(), 1);
    assert_eq!(slice(&source, inner[0].name.span), "welcomed");
    assert_eq!(slice(&source, inner[0].value.span), "c.email");
    // `to` ends the item even when the item is a string "to".
    assert_eq!(slice(&source, last[0].value.span), "\"to\" + \"day\"");
    assert_eq!(slice(&source, last[0].name.span), "log");
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
