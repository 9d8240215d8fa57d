#!/usr/bin/env python3
"""Report whether an account has been used (a stand-in for product analytics).

Input on stdin: {"account_id": "..."}. Output: {"activated": true|false}.
Accounts whose id ends in an even hex digit count as activated, so runs are
deterministic and both outcomes are easy to produce.
"""
import json
import sys

request = json.load(sys.stdin)
account_id = str(request.get("account_id", ""))
last = account_id[-1:] or "0"
print(json.dumps({"activated": last in "02468ACE"}))
