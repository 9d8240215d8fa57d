"""Time to the first reply text, with and without the fused reply (issue 24).

Serves PROGRAM with `flowc serve` twice, once per mode (the fused call on,
then `fused_reply = false`), each from a scratch copy of the program's
folder (its tools with it) whose flowc.toml, beside the program, is
CONFIG's with the mode added, and holds the same conversation through
the server-sent events of `POST /v1/sessions/{id}/messages`. For each turn it
reports the time to the first `text` event that is not blank (what the user
waits for), the whole turn's time, the model calls, and what became of the
fused reply (`fused_reply` events: used, or why not). The servers listen on
127.0.0.1 only and are stopped at the end.

    python3 scripts/ttft-bench.py FLOWC PROGRAM CONFIG SCRIPT [MODES]

MODES: `on,off` (default), `on` or `off`. CONFIG is a flowc.toml naming the
model (e.g. the real local server's, /tmp/rm/flowc.toml); SCRIPT has one
user message per line. Environment variables pass through (FLOWC_NOW,
FLOWC_SEED). Prints one table per mode, then one JSON line per turn.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

flowc, program, config, script = (os.path.abspath(arg) for arg in sys.argv[1:5])
modes = (sys.argv[5] if len(sys.argv) > 5 else "on,off").split(",")
with open(script) as file:
    messages = [line.rstrip("\n") for line in file if line.strip()]
with open(config) as file:
    # The mode is this script's to set: a line of CONFIG setting it goes.
    base_config = "".join(line for line in file if not line.strip().startswith("fused_reply"))


def post(url, body, stream=False):
    headers = {"content-type": "application/json"}
    if stream:
        headers["accept"] = "text/event-stream"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    return urllib.request.urlopen(request, timeout=3600)


def serve(directory, served):
    """Starts flowc serve on `served` in `directory`; returns the process
    and its URL."""
    process = subprocess.Popen(
        [flowc, "serve", served, "--addr", "127.0.0.1:0", "--store", f"sqlite:{directory}/flowc.db"],
        cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = process.stdout.readline()
    marker = "listening on "
    if marker not in line:
        process.kill()
        sys.exit(f"ttft-bench: flowc serve did not start: {line.strip()}")
    return process, line.split(marker, 1)[1].split()[0]


def turn(base, session, text):
    started = time.monotonic()
    first, event, result, fused = None, None, None, []
    with post(f"{base}/v1/sessions/{session}/messages", {"text": text}, stream=True) as response:
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: "):])
                if event == "text" and first is None and data.get("text", "").strip():
                    first = time.monotonic() - started
                elif event == "event" and data.get("event") == "fused_reply":
                    fused.append("used" if data.get("used") else f"not used: {data.get('reason')}")
                elif event == "turn":
                    result = data
                elif event == "error":
                    result = {"error": data}
    total = time.monotonic() - started
    result = result or {}
    return {
        "user": text,
        "first_text_s": None if first is None else round(first, 2),
        "turn_s": round(total, 2),
        "llm_calls": result.get("llm_calls"),
        "tokens": result.get("tokens"),
        "stopped_reason": result.get("stopped_reason"),
        "reply": result.get("reply"),
        "fused": fused,
        "error": result.get("error"),
    }


rows = []
for mode in modes:
    directory = tempfile.mkdtemp(prefix=f"flowc-ttft-{mode}-")
    # flowc reads the flowc.toml beside the program first: the program's
    # folder is copied, and the mode's flowc.toml written there.
    folder = os.path.join(directory, "program")
    shutil.copytree(os.path.dirname(program), folder, ignore=shutil.ignore_patterns(".flowc", "*.db"))
    served = os.path.join(folder, os.path.basename(program))
    with open(os.path.join(folder, "flowc.toml"), "w") as file:
        file.write(base_config + f"\nfused_reply = {'true' if mode == 'on' else 'false'}\n")
    process, base = serve(directory, served)
    try:
        name = os.path.splitext(os.path.basename(program))[0]
        session = json.load(post(f"{base}/v1/sessions", {"program": name}))["id"]
        print(f"fused reply {mode}:")
        print(f"  {'turn':<4} {'first text':>10} {'turn':>8} {'calls':>5}  fused reply")
        for index, text in enumerate(messages, 1):
            row = turn(base, session, text)
            row["mode"] = mode
            rows.append(row)
            first = "-" if row["first_text_s"] is None else f"{row['first_text_s']:.2f}s"
            print(f"  {index:<4} {first:>10} {row['turn_s']:>7.2f}s {row['llm_calls']!s:>5}  "
                  f"{'; '.join(row['fused']) or '-'}")
        calls = sum(row["llm_calls"] or 0 for row in rows if row["mode"] == mode)
        waited = [row["first_text_s"] for row in rows if row["mode"] == mode and row["first_text_s"] is not None]
        total = sum(row["turn_s"] for row in rows if row["mode"] == mode)
        print(f"  {calls} calls; first text after {sum(waited):.2f}s summed over {len(waited)} turns; "
              f"{total:.2f}s in all")
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(directory, ignore_errors=True)
for row in rows:
    print(json.dumps(row))
