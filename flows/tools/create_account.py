#!/usr/bin/env python3
"""Create a customer account (a stand-in for a provisioning API).

Input on stdin: {"company": "..."}. Output: {"account_id": "..."}.
"""
import hashlib
import json
import sys

request = json.load(sys.stdin)
company = str(request.get("company", "")).strip()
if not company:
    print("company is empty", file=sys.stderr)
    sys.exit(1)
print(json.dumps({"account_id": "ACC-" + hashlib.sha256(company.encode()).hexdigest()[:8].upper()}))
