#!/usr/bin/env bash
# Opt-in test against a real model: llama-cpp-python's OpenAI-compatible
# server with SmolLM2-135M, as shipped (it refuses the standard json_schema
# response_format and only does forced tool calls), from ../shared/real-llm.
#
#   FLOWC_REAL_MODEL=1 bash scripts/real-model-test.sh
#
# Not part of the default test command: the first run builds llama.cpp
# (about 5 minutes on 2 cores). Nothing leaves 127.0.0.1.
#
# 1. Provider level: the ignored `real_server` test drives the OpenAI
#    provider against the server: understand (with the fallback from
#    json_schema to json_object), a streamed reply, a tool round (auto
#    refused, then forced choice), and a broken answer from a tiny
#    max_tokens that must be repaired or fail cleanly.
# 2. Conversations: `flowc run FILE --provider openai --script FILE --json`
#    on the booking and support examples: every turn must complete, with at
#    most one understand and one respond call per turn (tool rounds aside);
#    then the booking conversation again with max_tokens = 8, where every
#    turn must complete or fail cleanly (exit 0 or 1, never a crash).
#    Skipped, with a note, while `flowc run` does not exist.
#
# Env: REALLLM_DIR (default /tmp/realllm), REALLLM_PORT (default 8765).
set -euo pipefail

if [ "${FLOWC_REAL_MODEL:-}" != 1 ]; then
  echo "real-model-test: skipped (set FLOWC_REAL_MODEL=1 to run it)"
  exit 0
fi

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REAL="$ROOT/../shared/real-llm"
DIR="${REALLLM_DIR:-/tmp/realllm}"
PORT="${REALLLM_PORT:-8765}"
URL="http://127.0.0.1:$PORT/v1"
WORK="$(mktemp -d)"
SERVER_PID=""

cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -f "$REAL/setup.sh" ] || { echo "real-model-test: $REAL/setup.sh not found" >&2; exit 2; }
echo "== setting up the server in $DIR (first time: about 5 minutes)"
bash "$REAL/setup.sh" "$DIR" >"$WORK/setup.log" 2>&1 || { tail -20 "$WORK/setup.log" >&2; exit 2; }

echo "== starting $DIR/serve-raw.sh $PORT"
"$DIR/serve-raw.sh" "$PORT" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 120); do
  if curl -fsS "$URL/models" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then tail -20 "$WORK/server.log" >&2; exit 2; fi
  sleep 1
done
curl -fsS "$URL/models" >/dev/null || { echo "real-model-test: the server did not start" >&2; exit 2; }

cd "$ROOT"
export FLOWC_REAL_MODEL_URL="$URL" FLOWC_MODEL=smollm2 FLOWC_NOW=2026-01-05T10:00:00Z
unset OPENAI_API_KEY

echo "== provider level"
cargo test --lib real_server -- --ignored --nocapture --test-threads 1

echo "== conversations"
cargo build --quiet --bin flowc
FLOWC="$ROOT/target/debug/flowc"
[ -n "${CARGO_TARGET_DIR:-}" ] && FLOWC="$CARGO_TARGET_DIR/debug/flowc"
if ! "$FLOWC" run --help >/dev/null 2>&1; then
  echo "real-model-test: \`flowc run\` is not available yet: conversations skipped"
  exit 0
fi

cat >"$WORK/booking.txt" <<'EOF'
Hi, I'd like to book a hotel room
The Ritz Paris
2026-06-03
2 guests
yes, book it
EOF
cat >"$WORK/support.txt" <<'EOF'
Hello, I need help
jane@example.com
It's a technical problem, the service is down
yes, thanks
EOF

# Runs one conversation; prints its per-turn figures and checks them.
# $1 program, $2 script, $3 label, $4 "strict" (every turn must complete) or
# "lenient" (a turn may fail, cleanly).
converse() {
  local program="$1" script="$2" label="$3" policy="$4" status=0
  OPENAI_BASE_URL="$URL" "$FLOWC" run "$program" --provider openai --script "$script" --json \
    >"$WORK/$label.jsonl" 2>"$WORK/$label.err" || status=$?
  python3 - "$WORK/$label.jsonl" "$WORK/$label.err" "$label" "$policy" "$status" <<'PYEOF'
import json, sys
path, err_path, label, policy, status = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
stderr = open(err_path).read()
problems = []
if status not in (0, 1) or "panicked" in stderr:
    problems.append(f"flowc exited {status}")
if policy == "strict" and status != 0:
    problems.append(f"flowc exited {status}")
turns = []
for number, line in enumerate(open(path), 1):
    try:
        turns.append(json.loads(line))
    except json.JSONDecodeError:
        problems.append(f"line {number} of stdout is not JSON")
calls = [turn.get("llm_calls", 0) for turn in turns]
print(f"{label}: {len(turns)} turns, model calls per turn {calls}, "
      f"mean {sum(calls) / max(len(calls), 1):.2f}, max {max(calls, default=0)}")
for turn in turns:
    tokens = turn.get("tokens", {})
    print(f"  turn {turn.get('turn')}: {turn.get('stopped_reason')}, flow {turn.get('flow')}, "
          f"step {turn.get('step')}, calls {turn.get('llm_calls')}, tokens {tokens}")
    tool_rounds = sum(1 for d in turn.get("directives", []) if str(d.get("source", "")).startswith("tool:"))
    if policy == "strict" and turn.get("stopped_reason") == "error":
        problems.append(f"turn {turn.get('turn')} failed")
    if turn.get("llm_calls", 0) > 2 + tool_rounds:
        problems.append(f"turn {turn.get('turn')} made {turn.get('llm_calls')} model calls")
if policy == "lenient" and status == 1 and "invalid" not in stderr and "error" not in stderr:
    problems.append("a failed turn gave no clear message")
for problem in problems:
    print(f"  FAIL: {problem}")
sys.exit(1 if problems else 0)
PYEOF
}

failed=0
converse "$ROOT/flows/booking.flow" "$WORK/booking.txt" booking strict || failed=1
converse "$ROOT/flows/support.yaml" "$WORK/support.txt" support strict || failed=1

# A broken answer: max_tokens = 8 truncates the JSON. flowc.toml is read
# from the working directory (the programs have none beside them).
mkdir -p "$WORK/tiny"
printf 'provider = "openai"\nmodel = "smollm2"\nbase_url = "%s"\nmax_tokens = 8\n' "$URL" >"$WORK/tiny/flowc.toml"
(cd "$WORK/tiny" && converse "$ROOT/flows/booking.flow" "$WORK/booking.txt" booking-max-tokens-8 lenient) || failed=1

exit "$failed"
