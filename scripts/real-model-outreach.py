#!/usr/bin/env python3
"""One outreach run on the real model, for scripts/real-model-test.sh: prints
its model calls, tokens, time, answers repaired and rejected, and what the
model wrote; fails unless the run completed, or failed only because an
answer was still invalid after its repair.

Usage: real-model-outreach.py RUN.json ELAPSED_MS EXIT_STATUS LABEL
"""
import json
import sys

path, elapsed, status, label = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
try:
    with open(path) as file:
        result = json.load(file)
except (OSError, ValueError):
    print(f"outreach run {label}: FAIL: exit {status}, no run object")
    sys.exit(1)
events = [event["event"] for event in result.get("events", [])]
repaired = events.count("model_answer_repaired")
rejected = events.count("model_answer_rejected")
tokens = result.get("tokens", {})
print(
    f"outreach run {label}: {result['status']} in {elapsed / 1000:.1f} s, {result['llm_calls']} model calls, "
    f"{tokens.get('prompt', 0)} prompt + {tokens.get('completion', 0)} completion tokens, "
    f"{repaired} answers repaired, {rejected} rejected"
)
wrote = {key: result.get("data", {}).get(key) for key in ("tone", "sent", "summary")}
print(f"  wrote: {json.dumps(wrote)[:400]}")
if result["status"] != "completed" and not (result["status"] == "failed" and rejected):
    print(f"outreach run {label}: FAIL: {result['status']}: {result.get('error') or result.get('steps')}")
    sys.exit(1)
