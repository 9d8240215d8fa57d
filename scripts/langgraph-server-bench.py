#!/usr/bin/env python3
"""The booking load of `cargo bench --bench serve` against LangGraph's own
server: the booking graph of scripts/langgraph-booking-bench.py served by
`langgraph dev` (LangGraph's in-memory API server, `langgraph-cli[inmem]`),
driven over HTTP at 1, 10 and 100 concurrent sessions. Each client creates
a thread (`POST /threads`), sends "Book the Grand Hotel for 2 guests on
2026-12-04" then "yes" as two runs waited for
(`POST /threads/{id}/runs/wait`), checks the booking was made, and starts
again. Prints turns/s, p50 and p99 per level, in the bench's format.

Bench-only, not part of the test suite. LangGraph is installed into a
virtual environment of its own, idempotently, at pinned versions (never into
the repository): `--venv DIR`, else FLOWC_LANGGRAPH_VENV, else
~/.cache/flowc/langgraph-venv. The server listens on 127.0.0.1 on a free
port and is stopped at the end. `langgraph dev` keeps threads and
checkpoints in memory (flushed to a local file now and then), so this is
LangGraph's HTTP server with no durable store: a floor for its cost per
turn, not a like-for-like figure with flowc's durable SQLite or PostgreSQL.

    python3 scripts/langgraph-server-bench.py [--quick] [--jobs N]

The clients are threads of this process (stdlib http.client, keep-alive
connections); they share the machine's cores with the server, as the Rust
bench's clients do.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import venv

BOOK = "Book the Grand Hotel for 2 guests on 2026-12-04"
HERE = os.path.dirname(os.path.abspath(__file__))
GRAPH_SCRIPT = os.path.join(HERE, "langgraph-booking-bench.py")
# Pinned: the figures name the versions they measured.
REQUIREMENTS = ["langgraph-cli[inmem]==0.4.40", "langgraph==1.2.24", "langgraph-api==0.16.7"]


def ensure_venv(directory: str) -> str:
    """The `langgraph` command of a virtual environment holding REQUIREMENTS,
    made (or brought to them) only when its marker says otherwise."""
    marker = os.path.join(directory, "flowc-requirements.txt")
    wanted = "\n".join(REQUIREMENTS) + "\n"
    command = os.path.join(directory, "bin", "langgraph")
    if os.path.exists(command) and os.path.exists(marker) and open(marker).read() == wanted:
        return command
    print(f"installing {', '.join(REQUIREMENTS)} into {directory}", file=sys.stderr, flush=True)
    if not os.path.exists(os.path.join(directory, "bin", "python")):
        venv.EnvBuilder(with_pip=True).create(directory)
    pip = [os.path.join(directory, "bin", "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + REQUIREMENTS, check=True)
    with open(marker, "w") as file:
        file.write(wanted)
    return command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def project(directory: str) -> str:
    """A LangGraph project whose one graph, `booking`, is the bench's own."""
    with open(os.path.join(directory, "graph.py"), "w") as file:
        file.write(
            "import importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('booking_bench', {GRAPH_SCRIPT!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "# No checkpointer: the server brings its own.\n"
            "graph = module.build(None)\n"
        )
    config = os.path.join(directory, "langgraph.json")
    with open(config, "w") as file:
        json.dump({"dependencies": ["."], "graphs": {"booking": "./graph.py:graph"}}, file)
    return config


def start_server(command: str, directory: str, port: int, jobs: int, log):
    config = project(directory)
    env = dict(os.environ, LANGGRAPH_CLI_NO_ANALYTICS="1", PYTHONUNBUFFERED="1")
    server = subprocess.Popen(
        [command, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
         "--config", config, "--n-jobs-per-worker", str(jobs), "--server-log-level", "WARNING"],
        cwd=directory, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"langgraph dev exited with {server.returncode} (its log: {log.name})")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/ok")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            pass
        time.sleep(0.2)
    stop_server(server)
    raise SystemExit(f"langgraph dev did not answer on 127.0.0.1:{port} within 180 s (its log: {log.name})")


def stop_server(server):
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Client:
    def __init__(self, port: int):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, path: str, body: dict):
        self.connection.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json"})
        response = self.connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise SystemExit(f"POST {path} answered {response.status}: {data[:300]!r}")
        return json.loads(data)


def client(port: int, start: threading.Barrier, run_for: float, latencies: list, errors: list):
    try:
        http_client = Client(port)
        start.wait()
        until = time.perf_counter() + run_for
        while time.perf_counter() < until:
            thread = http_client.post("/threads", {})["thread_id"]
            for text in (BOOK, "yes"):
                began = time.perf_counter()
                state = http_client.post(
                    f"/threads/{thread}/runs/wait", {"assistant_id": "booking", "input": {"message": text}}
                )
                latencies.append(time.perf_counter() - began)
                if text == "yes" and not str(state.get("reply", "")).startswith("Booked!"):
                    raise SystemExit(f"the conversation went wrong: {state}")
    except BaseException as error:  # noqa: BLE001 - reported by the level
        errors.append(repr(error))
        start.abort()


def percentile(samples, percent):
    if not samples:
        return 0.0
    rank = round(percent / 100 * (len(samples) - 1))
    return samples[min(rank, len(samples) - 1)] * 1e3


def level(port: int, name: str, sessions: int, run_for: float):
    start = threading.Barrier(sessions + 1)
    per_client = [[] for _ in range(sessions)]
    errors = []
    threads = [
        threading.Thread(target=client, args=(port, start, run_for, per_client[i], errors)) for i in range(sessions)
    ]
    for thread in threads:
        thread.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise SystemExit(f"{len(errors)} clients failed, the first: {errors[0]}")
    latencies = sorted(sample for samples in per_client for sample in samples)
    print(
        f"{name:<10} {sessions:>3} sessions: {len(latencies) / elapsed:>7.0f} turns/s, "
        f"p50 {percentile(latencies, 50):.2f} ms, p99 {percentile(latencies, 99):.2f} ms ({len(latencies)} turns)",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s per level instead of 8")
    parser.add_argument("--jobs", type=int, default=100, help="runs the server executes at once (--n-jobs-per-worker)")
    default_venv = os.environ.get("FLOWC_LANGGRAPH_VENV") or os.path.expanduser("~/.cache/flowc/langgraph-venv")
    parser.add_argument("--venv", default=default_venv, help="where LangGraph is installed")
    args = parser.parse_args()
    run_for = 2.0 if args.quick else 8.0
    command = ensure_venv(args.venv)
    directory = tempfile.mkdtemp(prefix="langgraph-server-bench-")
    log = open(os.path.join(directory, "server.log"), "w")
    port = free_port()
    server = start_server(command, directory, port, args.jobs, log)
    try:
        name = "lg-server"
        level(port, name, 10, 1.0)  # warm-up
        print(f"-- {name} (langgraph dev, in memory, {args.jobs} jobs)", flush=True)
        for sessions in (1, 10, 100):
            level(port, name, sessions, run_for)
    finally:
        stop_server(server)
        log.close()
    shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
