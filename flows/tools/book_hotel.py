#!/usr/bin/env python3
"""Reserve a hotel room (a stand-in for a real booking system).

flowc runs exec tools with the arguments as a JSON object on stdin and reads
one JSON object from stdout. The booking id is derived from the request, so
the same booking always gets the same id and conversation tests are
deterministic.
"""
import hashlib
import json
import sys

request = json.load(sys.stdin)
for key in ("hotel", "date", "guests"):
    if key not in request:
        print(f"missing argument: {key}", file=sys.stderr)
        sys.exit(2)
if not 1 <= int(request["guests"]) <= 10:
    print("guests must be between 1 and 10", file=sys.stderr)
    sys.exit(1)
digest = hashlib.sha256(
    f'{request["hotel"]}|{request["date"]}|{request["guests"]}'.encode()
).hexdigest()
print(json.dumps({"booking_id": "GH-" + digest[:8].upper()}))
