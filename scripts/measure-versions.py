#!/usr/bin/env python3
"""What a turn on a program version compiled again from the store costs.

A `flowc serve` on a fresh SQLite store holds 20 booking sessions to their
`confirm` step; the program is then edited so that step is gone, and a
second server, started after the edit, answers "no" in each (no tool runs):
its first such turn reads the old version from the store and compiles it,
the next 19 find it in memory. For comparison, 20 sessions on the current
version answer "no" at the same place. Times are each request's round trip
from this script, in milliseconds.

    python3 scripts/measure-versions.py target/release/flowc
"""
import json, os, re, shutil, statistics, subprocess, sys, tempfile, time, urllib.error, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = "Book the Grand Hotel for 2 guests on 2026-12-04"


def start(binary, folder, store):
    server = subprocess.Popen(
        [binary, "serve", "booking.flow", "--store", store, "--addr", "127.0.0.1:0"],
        cwd=folder, stderr=subprocess.PIPE, text=True, env={**os.environ, "FLOWC_NOW": "2026-01-05T10:00:00Z"})
    for line in server.stderr:
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            return server, found.group(1)
    sys.exit("flowc serve exited before listening")


def post(base, path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request) as response:
            answer, status = json.load(response), response.status
    except urllib.error.HTTPError as error:
        answer, status = json.load(error), error.code
    elapsed = (time.perf_counter() - started) * 1000
    if status >= 300:
        sys.exit(f"{path}: {status} {answer}")
    return answer, elapsed


def session_at_confirm(base):
    session, _ = post(base, "/v1/sessions", {"program": "booking"})
    post(base, f"/v1/sessions/{session['id']}/messages", {"text": BOOK})
    return session["id"]


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/flowc")
    folder = tempfile.mkdtemp(prefix="flowc-versions-")
    servers = []
    try:
        shutil.copy(os.path.join(ROOT, "flows/booking.flow"), folder)
        shutil.copytree(os.path.join(ROOT, "flows/tools"), os.path.join(folder, "tools"))
        store = "sqlite:" + os.path.join(folder, "flowc.db")
        first, one = start(binary, folder, store)
        servers.append(first)
        old = [session_at_confirm(one) for _ in range(20)]
        path = os.path.join(folder, "booking.flow")
        with open(path) as file:
            text = file.read()
        with open(path, "w") as file:
            file.write(text.replace("step confirm {", "step check {"))
        second, other = start(binary, folder, store)
        servers.append(second)
        restored = [post(other, f"/v1/sessions/{id}/messages", {"text": "no"})[1] for id in old]
        current = [post(other, f"/v1/sessions/{session_at_confirm(other)}/messages", {"text": "no"})[1]
                   for _ in range(20)]
        print(f"first turn on a version compiled from the store: {restored[0]:.1f} ms")
        print(f"next 19 turns on it: median {statistics.median(restored[1:]):.1f} ms")
        print(f"20 turns on the current version: median {statistics.median(current):.1f} ms")
    finally:
        for server in servers:
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
