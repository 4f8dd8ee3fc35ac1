"""A real torch c10d TCPStore server for the c10d store client tests (c10d_store_test.cc).

Starts torch.distributed.TCPStore as the master on 127.0.0.1 and an ephemeral port, prints
"<port> <torch version>" as the first line of stdout, then answers one JSON command per stdin
line with one JSON line, through torch's own client, so that the tests can see what torch
sees:

  {"op": "set", "prefix": "procgroup/attempt_0", "key": "k", "value": "v"} -> {"ok": true}
  {"op": "get", "prefix": "...", "key": "k"}                      -> {"ok": true, "value": "v"}
  {"op": "add", "prefix": "...", "key": "n", "delta": 2}         -> {"ok": true, "value": 5}

"prefix" wraps the store in torch's PrefixStore (as torchrun's workers do); "" uses it bare.
Values are text (latin-1 for bytes). A failed command answers {"ok": false, "error": "..."}.
The server stops when stdin closes, so it never outlives the test that started it.
"""

import datetime
import json
import sys

import torch
import torch.distributed as dist


def main():
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=10))
    print(store.port, torch.__version__, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
            view = dist.PrefixStore(cmd["prefix"], store) if cmd.get("prefix") else store
            op, key = cmd["op"], cmd["key"]
            if op == "set":
                view.set(key, cmd["value"])
                reply = {"ok": True}
            elif op == "get":
                reply = {"ok": True, "value": view.get(key).decode("latin-1")}
            elif op == "add":
                reply = {"ok": True, "value": view.add(key, int(cmd["delta"]))}
            else:
                reply = {"ok": False, "error": "unknown op " + op}
        except Exception as e:  # reported to the test, which fails with the message
            reply = {"ok": False, "error": repr(e)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
