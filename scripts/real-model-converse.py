"""Drives one conversation through `flowc run --json --record` and checks it
(used by real-model-test.sh).

Each turn is timed as its JSON line arrives; the recording tells the calls
of each turn (understand, its repair, respond, tool calls). Prints the
figures; exits 1 when a check fails. Policy "strict": every turn must
complete; "lenient": a turn may fail, but only cleanly (exit 1, one clear
error line).

    python3 real-model-converse.py FLOWC PROGRAM SCRIPT LABEL POLICY CWD RECORDING
"""
import json
import subprocess
import sys
import time

flowc, program, script, label, policy, cwd, record = sys.argv[1:8]
started = time.monotonic()
process = subprocess.Popen(
    [flowc, "run", program, "--script", script, "--json", "--record", record],
    cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
turns, problems, last = [], [], started
for line in process.stdout:
    now = time.monotonic()
    try:
        turn = json.loads(line)
    except json.JSONDecodeError:
        problems.append(f"a line of stdout is not JSON: {line!r}")
        continue
    turn["seconds"] = now - last
    last = now
    turns.append(turn)
stderr = process.stderr.read()
status = process.wait()
total = time.monotonic() - started

try:
    with open(record) as file:
        calls = json.load(file)["calls"]
except (OSError, ValueError, KeyError):
    calls = []
try:
    with open(f"{cwd}/flowc.toml") as file:
        config = file.read()
except OSError:
    config = ""
forced = 'tool_choice = "forced"' in config

if status not in (0, 1) or "panicked" in stderr:
    problems.append(f"flowc exited {status}")
if policy == "strict" and status != 0:
    problems.append(f"flowc exited {status}: {stderr.strip()}")
if status == 1:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    if len(errors) != 1 or "model call failed" not in errors[0]:
        problems.append(f"a failed turn gave no clear one-line error: {stderr.strip()!r}")

notes = [line for line in stderr.splitlines() if line.startswith("note:")]
mode = notes[-1].split(" now uses ", 1)[1].split(" (", 1)[0] if notes else "as configured (no fallback)"
per_turn = [turn.get("llm_calls", 0) for turn in turns]
print(f"{label}: {len(turns)} turns in {total:.1f}s, exit {status}; model calls per turn {per_turn} = {sum(per_turn)}, "
      f"mean {sum(per_turn) / max(len(per_turn), 1):.2f}; mode: {mode}")
within = 0
for turn in turns:
    mine = [call for call in calls if call.get("request", {}).get("message") == turn.get("user")]
    understand = sum(call["understanding"]["usage"]["calls"] for call in mine if call.get("understanding"))
    respond = sum(call["response"]["usage"]["calls"] for call in mine if call.get("response"))
    tool_calls = sum(len(call.get("tool_calls", [])) for call in mine)
    offered = any(call["kind"] == "respond" and call["request"].get("tools") for call in mine)
    repairs = sum(max(call["understanding"]["usage"]["calls"] - 1, 0) for call in mine if call.get("understanding"))
    # A blank reply is asked for once more (issue 24, never an empty answer).
    blank = sum(1 for call in mine if call.get("response") and not call["response"].get("text", "").strip())
    tokens = turn.get("tokens", {})
    detail = f"understand {understand}" + (f" ({repairs} repair)" if repairs else "") + f", respond {respond}"
    if offered:
        detail += f" ({tool_calls} tool calls)"
    if blank:
        detail += f" ({blank} blank, asked again)"
    print(f"  turn {turn.get('turn')}: {turn['seconds']:5.1f}s  {turn.get('stopped_reason'):13} "
          f"{turn.get('flow')}/{turn.get('step')}  calls {turn.get('llm_calls')}: {detail}; "
          f"tokens {tokens.get('prompt')} prompt + {tokens.get('completion')} completion; "
          f"reply {turn.get('reply', '')[:70]!r}")
    if policy == "strict" and turn.get("stopped_reason") == "error":
        problems.append(f"turn {turn.get('turn')} failed")
    # The target: one understand and one respond call per turn, plus tool
    # rounds (a forced tool choice adds one decision call to a turn with
    # tools), a repair when the answer was invalid, and a blank reply's
    # second ask.
    bound = 2 + repairs + min(blank, 1) + tool_calls + (1 if offered and forced else 0)
    if turn.get("llm_calls", 0) > bound:
        problems.append(f"turn {turn.get('turn')} made {turn.get('llm_calls')} model calls (at most {bound} expected)")
    if understand <= 1 and respond <= 1:
        within += 1
print(f"  {within} of {len(turns)} turns within 1 understand + 1 respond call")
for line in stderr.splitlines():
    if line.startswith(("error:", "note:")):
        print(f"  {line}")
for problem in problems:
    print(f"  FAIL: {problem}")
sys.exit(1 if problems else 0)
