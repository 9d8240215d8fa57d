#!/usr/bin/env python3
"""The booking conversation of flows/booking.flow as a LangGraph graph, under
the load `cargo bench --bench serve` puts on `flowc serve`: at 1, 10 and 100
concurrent sessions, each client creates a conversation, sends "Book the
Grand Hotel for 2 guests on 2026-12-04" then "yes", and starts again. Prints
turns/s, p50 and p99 per level, in the bench's format.

Bench-only (not part of the test suite). The model is a deterministic fake
(regular expressions, as flowc's offline provider reads the same messages)
and the booking tool an in-process double, as in the Rust bench, so what is
measured is LangGraph's own cost per turn: running the graph from START with
its state restored from a checkpointer and saved again after the turn.

    python3 -m venv /tmp/lg && /tmp/lg/bin/pip install langgraph langgraph-checkpoint-sqlite
    /tmp/lg/bin/python scripts/langgraph-booking-bench.py [--quick] [--store memory|sqlite]

`--store sqlite` (the default) keeps checkpoints in a SQLite file through
`langgraph-checkpoint-sqlite` (the comparison with flowc's SQLite store);
`memory` keeps them in the process (LangGraph's `InMemorySaver`, no
durability: a floor, not a like-for-like figure). The clients are threads
of this process calling the compiled graph directly: no HTTP, which flowc's
bench pays.
"""

import argparse
import os
import re
import sqlite3
import tempfile
import threading
import time
import uuid
from typing import Optional, TypedDict

from langgraph.graph import END, START, StateGraph

BOOK = "Book the Grand Hotel for 2 guests on 2026-12-04"


class Booking(TypedDict, total=False):
    message: str
    reply: str
    hotel: Optional[str]
    date: Optional[str]
    guests: Optional[int]
    confirmed: Optional[bool]
    booking_id: Optional[str]
    asked: Optional[str]
    done: bool


HOTEL = re.compile(r"\b(Grand Hotel|Overlook|Ritz Paris)\b", re.IGNORECASE)
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
GUESTS = re.compile(r"\b(\d{1,2})\s+guests?\b", re.IGNORECASE)


def understand(state: Booking) -> Booking:
    """The fake model: reads what the message gives, as the offline provider does."""
    text = state.get("message", "")
    update: Booking = {}
    if state.get("done"):
        # A new booking after the last one: its own fields and its own "yes".
        update.update(hotel=None, date=None, guests=None, confirmed=None, booking_id=None, done=False)
    if (found := HOTEL.search(text)) is not None:
        update["hotel"] = found.group(1)
    if (found := DATE.search(text)) is not None:
        update["date"] = found.group(1)
    if (found := GUESTS.search(text)) is not None and 1 <= int(found.group(1)) <= 10:
        update["guests"] = int(found.group(1))
    if state.get("asked") == "confirmed":
        answer = text.strip().lower()
        if answer in ("yes", "y", "sure", "ok"):
            update["confirmed"] = True
        elif answer in ("no", "n"):
            update["confirmed"] = False
    return update


def next_step(state: Booking) -> str:
    for field in ("hotel", "date", "guests"):
        if state.get(field) is None:
            return "ask_" + field
    if state.get("confirmed") is None:
        return "confirm"
    return "book" if state["confirmed"] else "cancelled"


def ask(field: str, prompt: str):
    def node(_: Booking) -> Booking:
        return {"reply": prompt, "asked": field}

    return node


def confirm(state: Booking) -> Booking:
    return {
        "reply": f"Shall I book {state['hotel']} on {state['date']} for {state['guests']} guests?",
        "asked": "confirmed",
    }


def book(state: Booking) -> Booking:
    # The in-process double of flows/tools/book_hotel.py, as in the Rust bench.
    booking_id = "BK-" + uuid.uuid5(uuid.NAMESPACE_URL, f"{state['hotel']}|{state['date']}|{state['guests']}").hex[:8]
    return {"booking_id": booking_id, "reply": f"Booked! Your confirmation number is {booking_id}.", "asked": None, "done": True}


def cancelled(_: Booking) -> Booking:
    return {"reply": "No problem, nothing was booked.", "asked": None, "done": True}


def build(checkpointer):
    graph = StateGraph(Booking)
    graph.add_node("understand", understand)
    graph.add_node("ask_hotel", ask("hotel", "Which hotel would you like to book?"))
    graph.add_node("ask_date", ask("date", "For which date?"))
    graph.add_node("ask_guests", ask("guests", "How many guests?"))
    graph.add_node("confirm", confirm)
    graph.add_node("book", book)
    graph.add_node("cancelled", cancelled)
    graph.add_edge(START, "understand")
    graph.add_conditional_edges("understand", next_step)
    for node in ("ask_hotel", "ask_date", "ask_guests", "confirm", "book", "cancelled"):
        graph.add_edge(node, END)
    return graph.compile(checkpointer=checkpointer)


def checkpointer(kind: str, directory: str):
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(os.path.join(directory, "checkpoints.db"), check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return SqliteSaver(connection)


def client(app, start: threading.Barrier, run_for: float, latencies: list):
    start.wait()
    until = time.perf_counter() + run_for
    while time.perf_counter() < until:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        for text in (BOOK, "yes"):
            began = time.perf_counter()
            state = app.invoke({"message": text}, config)
            latencies.append(time.perf_counter() - began)
            if text == "yes" and not str(state.get("reply", "")).startswith("Booked!"):
                raise SystemExit(f"the conversation went wrong: {state}")


def percentile(samples, percent):
    if not samples:
        return 0.0
    rank = round(percent / 100 * (len(samples) - 1))
    return samples[min(rank, len(samples) - 1)] * 1e3


def level(app, name: str, sessions: int, run_for: float):
    start = threading.Barrier(sessions + 1)
    per_client = [[] for _ in range(sessions)]
    threads = [threading.Thread(target=client, args=(app, start, run_for, per_client[i])) for i in range(sessions)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    latencies = sorted(sample for samples in per_client for sample in samples)
    print(
        f"{name:<10} {sessions:>3} sessions: {len(latencies) / elapsed:>7.0f} turns/s, "
        f"p50 {percentile(latencies, 50):.2f} ms, p99 {percentile(latencies, 99):.2f} ms ({len(latencies)} turns)",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 s per level instead of 4")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    args = parser.parse_args()
    run_for = 1.0 if args.quick else 4.0
    with tempfile.TemporaryDirectory(prefix="langgraph-bench-") as directory:
        app = build(checkpointer(args.store, directory))
        name = f"lg-{args.store}"
        level(app, name, 10, 0.2)  # warm-up
        print(f"-- {name}")
        for sessions in (1, 10, 100):
            level(app, name, sessions, run_for)


if __name__ == "__main__":
    main()
