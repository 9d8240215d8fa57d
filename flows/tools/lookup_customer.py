#!/usr/bin/env python3
"""Look up a customer by email (a stand-in for a CRM).

Input on stdin: {"email": "..."}. Output: {"name": "...", "plan": "..."}.
Unknown addresses get a name from the address, so demos work with any email.
"""
import json
import sys

KNOWN = {
    "ann@example.com": {"name": "Ann", "plan": "pro"},
    "bob@example.com": {"name": "Bob", "plan": "free"},
}

request = json.load(sys.stdin)
email = str(request.get("email", "")).strip().lower()
if "@" not in email:
    print(f"not an email address: {email!r}", file=sys.stderr)
    sys.exit(1)
customer = KNOWN.get(email) or {"name": email.split("@")[0].capitalize(), "plan": "free"}
print(json.dumps(customer))
