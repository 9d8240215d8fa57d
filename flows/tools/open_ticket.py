#!/usr/bin/env python3
"""Open a support ticket (a stand-in for a ticket system).

Input on stdin: {"email", "issue", "severity"}. Output: {"ticket_id": "..."}.
The id is derived from the request, so tests are deterministic.
"""
import hashlib
import json
import sys

request = json.load(sys.stdin)
key = "|".join(str(request.get(name, "")) for name in ("email", "issue", "severity"))
prefix = "URG" if request.get("severity") == "high" else "TCK"
print(json.dumps({"ticket_id": prefix + "-" + hashlib.sha256(key.encode()).hexdigest()[:6].upper()}))
