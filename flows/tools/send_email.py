#!/usr/bin/env python3
"""Send an email (a stand-in for a mail API): fails on a bad address.

Input on stdin: {"email", "text"}. Output: {"message_id": "..."}.
"""
import hashlib
import json
import sys

request = json.load(sys.stdin)
email = str(request.get("email", ""))
if "@" not in email:
    print(f"cannot send to {email!r}: not an email address", file=sys.stderr)
    sys.exit(1)
digest = hashlib.sha256(f'{email}|{request.get("text")}'.encode()).hexdigest()[:10]
print(json.dumps({"message_id": "MSG-" + digest}))
