#!/usr/bin/env python3
"""Measures the turn's shape in src/runtime/engine/ (issue 20, item 3):
the fields of the turn's state struct, the functions working on it, and
the calls between stage files (a function defined in file X called from
file Y). Usage: python3 scripts/turn_metrics.py [STRUCT] (default Turn;
after the split, TurnState)."""
import os
import re
import sys

ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "runtime", "engine")
struct = sys.argv[1] if len(sys.argv) > 1 else "Turn"


def code_of(path):
    text = open(path, encoding="utf-8").read()
    text = text.split("#[cfg(test)]")[0]
    return "\n".join(line.split("//")[0] for line in text.splitlines())


files = {name: code_of(os.path.join(ENGINE, name)) for name in sorted(os.listdir(ENGINE)) if name.endswith(".rs")}

# Fields: lines `name: Type,` inside `pub struct STRUCT<...> {`.
fields = 0
for code in files.values():
    match = re.search(r"pub(?:\([a-z]+\))? struct " + struct + r"\b[^{;]*\{(.*?)\n\}", code, re.S)
    if match:
        fields = len(re.findall(r"^\s+(?:pub(?:\([a-z]+\))? )?[a-z_]+: ", match.group(1), re.M))

# Functions over the state: methods of `impl STRUCT` blocks, and free
# functions taking `&mut STRUCT` / `&STRUCT`.
methods = 0
defined = {}
for name, code in files.items():
    for block in re.finditer(r"\nimpl(?:<[^>]*>)? " + struct + r"\b[^{]*\{(.*?)\n\}", code, re.S):
        for fn in re.finditer(r"\n    (?:pub(?:\([a-z]+\))? )?fn ([a-z_0-9]+)", block.group(1)):
            methods += 1
    for fn in re.finditer(r"\n(?:    )?(?:pub(?:\([a-z]+\))? )?fn ([a-z_0-9]+)(?:<[^>]*>)?\(([^)]*)\)", code):
        defined.setdefault(fn.group(1), set()).add(name)
        if re.search(r"&(?:mut )?" + struct + r"\b", fn.group(2)) and not fn.group(0).startswith("\n    "):
            methods += 1

# Calls between files: `.f(` or `f(` (not `fn f(`) in a file other than the
# one defining f; f must be defined in exactly one engine file.
calls = set()
for caller, code in files.items():
    for callee_name, homes in defined.items():
        if len(homes) != 1:
            continue
        home = next(iter(homes))
        if home == caller:
            continue
        # `self.f(` (a method) or a bare or path call `f(` / `x::f(`; a
        # method of another value (`flow.step(`) is not the turn's.
        if re.search(r"(?:self\.|(?<![.A-Za-z_0-9]))" + callee_name + r"\(", code.replace("fn " + callee_name, "")):
            calls.add((caller, home, callee_name))

print(f"struct {struct}: {fields} fields")
print(f"functions over {struct} (methods + free fns taking it): {methods}")
print(f"calls between files (caller -> callee: fn): {len(calls)} distinct")
HUB = {"mod.rs", "runtime.rs", "state.rs", "services.rs"}
stage = [call for call in calls if call[0] not in HUB and call[1] not in HUB]
print(f"calls between stage files (neither is mod/runtime/state/services.rs): {len(stage)} distinct, "
      f"{len({(c, h) for c, h, _ in stage})} file pairs")
# Seen by the import-cycle test (tests/check/modules.rs): the caller names
# the callee's module (`use super::route::leave`, `super::route::leave(`).
seen = [call for call in stage if re.search(r"super::" + call[1][:-3] + r"\b", files[call[0]])]
print(f"  of which the import-cycle test sees (named through `super::<file>`): {len(seen)}")
pairs = {}
for caller, home, fn in sorted(calls):
    pairs.setdefault((caller, home), []).append(fn)
for (caller, home), fns in sorted(pairs.items()):
    print(f"  {caller} -> {home}: {', '.join(fns)}")
