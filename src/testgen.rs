//! Generated `.flow` programs for benchmarks and stress tests: large
//! realistic programs (many flows of collecting, branching, auto and
//! skippable steps, all of which check clean) and pathological shapes (a
//! long step chain, a long cycle, a huge branch table, deep expressions).
//! Not part of flowc's interface.

use std::fmt::Write;

const SCHEMA: &str = r#"agent Bench {
  identity "You are a test agent."
}

schema {
  name: string "The user's name"
  count: int 0..1000
  agree: bool
  plan: enum(free, pro, enterprise)
  note: string
  result: string
  total: int
}

tool lookup(name: string, count: int) -> { result: string } {
  builtin echo
}

signal wants_human {
  when "the user asks for a human"
  then { reply "A human will answer." }
}

"#;

/// A program of `flows` conversation flows of `steps` steps each (at
/// least 6), every one routed, collecting, branching and calling a tool.
/// It checks clean: benchmarks measure the checker on a valid program, and
/// a test proves a large valid program gets no false positive.
pub fn large_program(flows: usize, steps: usize) -> String {
    let steps = steps.max(6);
    let mut out = String::with_capacity(flows * steps * 160 + SCHEMA.len());
    out.push_str(SCHEMA);
    for flow in 0..flows {
        write_flow(&mut out, flow, steps);
    }
    out
}

fn write_flow(out: &mut String, flow: usize, steps: usize) {
    let _ = writeln!(out, "flow f{flow} \"Flow number {flow}\" {{");
    let _ = writeln!(out, "  when \"the user talks about topic {flow}\"");
    let _ = writeln!(out, "  requires name");
    let _ = writeln!(out, "  on_enter {{ set total = 0 }}");
    let _ = writeln!(out, "  step s0 {{");
    let _ = writeln!(out, "    prompt \"Hello! Your name, a count, a plan, and do you agree?\"");
    let _ = writeln!(out, "    collect name, count, plan, agree");
    let _ = writeln!(out, "  }}");
    for step in 1..steps.saturating_sub(1) {
        let next = step + 1;
        let after = (step + 2).min(steps - 1);
        match step % 5 {
            1 => {
                let _ = writeln!(out, "  step s{step} {{");
                let _ = writeln!(out, "    prompt \"{{{{name}}}}, step {step} of flow {flow}: shall we go on?\"");
                let _ = writeln!(out, "    branch {{");
                let _ = writeln!(out, "      if count > {step} and plan == \"pro\" -> s{after}");
                let _ = writeln!(out, "      if agree == false -> s{next} \"disagrees\"");
                let _ = writeln!(out, "      when \"the user wants to start over\" -> s0");
                let _ = writeln!(out, "      else -> s{next}");
                let _ = writeln!(out, "    }}");
                let _ = writeln!(out, "  }}");
            }
            2 => {
                let _ = writeln!(out, "  auto step s{step} {{");
                let _ = writeln!(out, "    set total = total + {step}");
                let _ = writeln!(out, "    call lookup(name: name, count: count + 1) -> result");
                let _ = writeln!(out, "    say \"Looked up {{{{name}}}}: {{{{result}}}} ({{{{total}}}})\"");
                let _ = writeln!(out, "  }}");
            }
            3 => {
                let _ = writeln!(out, "  step s{step} {{");
                let _ = writeln!(out, "    skip_if note is set or plan == \"free\"");
                let _ = writeln!(out, "    prompt \"Anything to add about {{{{plan}}}}?\"");
                let _ = writeln!(out, "    collect note");
                let _ = writeln!(out, "  }}");
            }
            4 => {
                let _ = writeln!(out, "  step s{step} {{");
                let _ = writeln!(out, "    requires name, count");
                let _ = writeln!(out, "    if count < 500");
                let _ = writeln!(out, "    say \"{{{{name}}}} has {{{{count}}}} at step {step}.\"");
                let _ = writeln!(out, "  }}");
            }
            _ => {
                let _ = writeln!(out, "  step s{step} {{");
                let _ = writeln!(out, "    prompt \"Tell me more, {{{{name}}}}.\"");
                let _ = writeln!(out, "    collect result");
                let _ = writeln!(out, "    max_asks 2");
                let _ = writeln!(out, "    on_no_answer {{ goto_step s0 }}");
                let _ = writeln!(out, "  }}");
            }
        }
    }
    let last = steps - 1;
    let _ = writeln!(out, "  step s{last} {{");
    let _ = writeln!(out, "    say \"Done with flow {flow}, {{{{name}}}}.\"");
    let _ = writeln!(out, "    next end");
    let _ = writeln!(out, "  }}");
    let _ = writeln!(out, "}}\n");
}

/// [`large_program`] with the moves the differential test follows
/// (issue 20): each flow's step `s1` first goes to the next flow (`goto`,
/// a new run) for the enterprise plan; a `detour` flow whose `on_enter` writes and
/// whose first step may be passed over; pre-phase signals that jump into
/// the detour's first step (`goto_step`) and complete the current flow,
/// and a post-phase one that goes back to the first flow (`goto`, applied
/// after the reply). It compiles without errors (the warnings of
/// [`large_program`] aside, the jumps back to `s0` of another flow share
/// its consent).
pub fn moving_program(flows: usize, steps: usize) -> String {
    let flows = flows.max(1);
    let mut out = large_program(flows, steps);
    for flow in 0..flows {
        let next = (flow + 1) % flows;
        let entry = "    branch {\n";
        let marker = format!("flow f{flow} \"Flow number {flow}\" {{");
        let Some(start) = out.find(&marker) else { continue };
        if let Some(offset) = out[start..].find(entry) {
            let at = start + offset + entry.len();
            out.insert_str(at, &format!("      if plan == \"enterprise\" -> {{ goto f{next} }}\n"));
        }
    }
    out.push_str(
        r#"flow detour "A detour" {
  on_enter { set total = 1 }
  step d0 {
    skip_if note is set
    prompt "Anything to note on the way?"
    collect note
  }
  step d1 {
    say "Back from the detour."
    next end
  }
}

signal take_detour {
  when "the user wants a detour"
  then { goto_step detour.d0 }
}

signal finished {
  when "the user is finished with this"
  then { complete }
}

signal later {
  when "the user wants to begin again later"
  phase post
  then { goto f0 }
}
"#,
    );
    out
}

const YAML_SCHEMA: &str = r#"agent:
  name: Bench
  identity: You are a test agent.
schema:
  name: { type: string, description: "The user's name" }
  count: { type: int, min: 0, max: 1000 }
  agree: bool
  plan: { type: enum, values: [free, pro, enterprise] }
  note: string
  result: string
  total: int
tools:
  lookup:
    params: { name: string, count: int }
    returns: { result: string }
    builtin: echo
signals:
  wants_human:
    when: the user asks for a human
    then: { reply: A human will answer. }
flows:
"#;

/// [`large_program`] written in YAML: the same program, so both front ends
/// are measured on equal input (a test asserts the two compile to the same
/// IR).
pub fn large_program_yaml(flows: usize, steps: usize) -> String {
    let steps = steps.max(6);
    let mut out = String::with_capacity(flows * steps * 220 + YAML_SCHEMA.len());
    out.push_str(YAML_SCHEMA);
    for flow in 0..flows {
        write_yaml_flow(&mut out, flow, steps);
    }
    out
}

fn write_yaml_flow(out: &mut String, flow: usize, steps: usize) {
    let _ = writeln!(out, "  f{flow}:");
    let _ = writeln!(out, "    title: Flow number {flow}");
    let _ = writeln!(out, "    when: the user talks about topic {flow}");
    let _ = writeln!(out, "    requires: [name]");
    let _ = writeln!(out, "    on_enter: [{{ set: {{ total: 0 }} }}]");
    let _ = writeln!(out, "    steps:");
    let _ = writeln!(out, "      - id: s0");
    let _ = writeln!(out, "        prompt: Hello! Your name, a count, a plan, and do you agree?");
    let _ = writeln!(out, "        collect: [name, count, plan, agree]");
    for step in 1..steps.saturating_sub(1) {
        let next = step + 1;
        let after = (step + 2).min(steps - 1);
        match step % 5 {
            1 => {
                let _ = writeln!(out, "      - id: s{step}");
                let _ = writeln!(out, "        prompt: \"{{{{name}}}}, step {step} of flow {flow}: shall we go on?\"");
                let _ = writeln!(out, "        branches:");
                let _ = writeln!(out, "          - {{ if: 'count > {step} and plan == \"pro\"', then: s{after} }}");
                let _ = writeln!(out, "          - {{ if: agree == false, then: s{next}, label: disagrees }}");
                let _ = writeln!(out, "          - {{ when: the user wants to start over, then: s0 }}");
                let _ = writeln!(out, "          - {{ then: s{next} }}");
            }
            2 => {
                let _ = writeln!(out, "      - id: s{step}");
                let _ = writeln!(out, "        auto: true");
                let _ = writeln!(out, "        do:");
                let _ = writeln!(out, "          - set: {{ total: total + {step} }}");
                let _ = writeln!(
                    out,
                    "          - call: {{ tool: lookup, args: {{ name: name, count: count + 1 }}, save: result }}"
                );
                let _ = writeln!(out, "        say: \"Looked up {{{{name}}}}: {{{{result}}}} ({{{{total}}}})\"");
            }
            3 => {
                let _ = writeln!(out, "      - id: s{step}");
                let _ = writeln!(out, "        skip_if: note is set or plan == \"free\"");
                let _ = writeln!(out, "        prompt: \"Anything to add about {{{{plan}}}}?\"");
                let _ = writeln!(out, "        collect: [note]");
            }
            4 => {
                let _ = writeln!(out, "      - id: s{step}");
                let _ = writeln!(out, "        requires: [name, count]");
                let _ = writeln!(out, "        if: count < 500");
                let _ = writeln!(out, "        say: \"{{{{name}}}} has {{{{count}}}} at step {step}.\"");
            }
            _ => {
                let _ = writeln!(out, "      - id: s{step}");
                let _ = writeln!(out, "        prompt: \"Tell me more, {{{{name}}}}.\"");
                let _ = writeln!(out, "        collect: [result]");
                let _ = writeln!(out, "        max_asks: 2");
                let _ = writeln!(out, "        on_no_answer: {{ goto_step: s0 }}");
            }
        }
    }
    let last = steps - 1;
    let _ = writeln!(out, "      - id: s{last}");
    let _ = writeln!(out, "        say: \"Done with flow {flow}, {{{{name}}}}.\"");
    let _ = writeln!(out, "        next: end");
}

/// One workflow whose `steps` auto steps form a chain by `next`, written
/// in reverse order so that list order and execution order disagree. With
/// `close_cycle`, the last step jumps back to the first: one long auto
/// cycle.
pub fn step_chain(steps: usize, close_cycle: bool) -> String {
    let steps = steps.max(2);
    let mut out = String::with_capacity(steps * 80 + SCHEMA.len());
    out.push_str(SCHEMA);
    let _ = writeln!(out, "flow chain {{");
    let _ = writeln!(out, "  auto step start {{ set total = 0  next s0 }}");
    for step in (0..steps).rev() {
        let target = if step + 1 < steps {
            format!("s{}", step + 1)
        } else if close_cycle {
            "s0".to_string()
        } else {
            "end".to_string()
        };
        let _ = writeln!(out, "  auto step s{step} {{ set total = total + 1  next {target} }}");
    }
    let _ = writeln!(out, "}}");
    out
}

/// One step with a branch table of `entries` entries; every tenth entry
/// repeats the one before it (so a tenth are unreachable).
pub fn branch_table(entries: usize) -> String {
    let mut out = String::with_capacity(entries * 50 + SCHEMA.len());
    out.push_str(SCHEMA);
    let _ = writeln!(out, "flow table {{");
    let _ = writeln!(out, "  when \"the user picks a number\"");
    let _ = writeln!(out, "  step ask {{");
    let _ = writeln!(out, "    prompt \"Pick a number.\"");
    let _ = writeln!(out, "    collect count");
    let _ = writeln!(out, "    branch {{");
    for entry in 0..entries {
        let value = if entry % 10 == 9 { entry - 1 } else { entry };
        let _ = writeln!(out, "      if count == {value} -> t{}", entry % 7);
    }
    let _ = writeln!(out, "      else -> t0");
    let _ = writeln!(out, "    }}");
    let _ = writeln!(out, "  }}");
    for target in 0..7 {
        let _ = writeln!(out, "  step t{target} {{ say \"{target}\"  next end }}");
    }
    let _ = writeln!(out, "}}");
    out
}

/// A flow whose steps hold expressions nested `depth` deep (brackets and
/// `not`s), `count` of them. Past the front ends' limit they are refused
/// with a diagnostic, never by the stack.
pub fn deep_expressions(depth: usize, count: usize) -> String {
    let mut out = String::with_capacity(count * depth * 8 + SCHEMA.len());
    out.push_str(SCHEMA);
    let _ = writeln!(out, "flow deep {{");
    let _ = writeln!(out, "  when \"the user likes deep things\"");
    let _ = writeln!(out, "  step ask {{ prompt \"A number?\"  collect count }}");
    for index in 0..count {
        let mut expr = "count".to_string();
        for level in 0..depth {
            expr = if level % 2 == 0 { format!("({expr} + 1)") } else { format!("-{expr}") };
        }
        let _ = writeln!(
            out,
            "  step d{index} {{ if {expr} > 0 or not not not (count > {index})  say \"{{{{count}}}}\" }}"
        );
    }
    let _ = writeln!(out, "}}");
    out
}
