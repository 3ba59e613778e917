#!/usr/bin/env python3
"""Captures cluster replies byte for byte from a running redis-server cluster.

Usage: capture.py PORT OUTDIR  (see capture.sh). Each reply is read up to the
reply of an ECHO sent right behind the command, so no RESP parser is needed.
"""
import os
import socket
import sys

port, outdir = int(sys.argv[1]), sys.argv[2]
MARK = b"capture-end-7f3a"


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def call(sock, *args):
    sock.sendall(encode(list(args)) + encode(["ECHO", MARK]))
    tail = b"$%d\r\n%s\r\n" % (len(MARK), MARK)
    buf = b""
    while not buf.endswith(tail):
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("connection closed")
        buf += chunk
    return buf[: -len(tail)]


def save(name, data):
    with open(os.path.join(outdir, name), "wb") as f:
        f.write(data)


for proto in (2, 3):
    s = socket.create_connection(("127.0.0.1", port))
    if proto == 3:
        call(s, "HELLO", "3")
    for name, args in [
        ("slots", ["CLUSTER", "SLOTS"]),
        ("shards", ["CLUSTER", "SHARDS"]),
        ("nodes", ["CLUSTER", "NODES"]),
        ("info", ["CLUSTER", "INFO"]),
        ("myid", ["CLUSTER", "MYID"]),
        ("keyslot", ["CLUSTER", "KEYSLOT", "{tenant:7}:user:42"]),
        ("keyslot-arity", ["CLUSTER", "KEYSLOT"]),
        ("countkeysinslot", ["CLUSTER", "COUNTKEYSINSLOT", "2624"]),
        ("countkeysinslot-range", ["CLUSTER", "COUNTKEYSINSLOT", "16384"]),
        ("countkeysinslot-neg", ["CLUSTER", "COUNTKEYSINSLOT", "-1"]),
        ("countkeysinslot-nan", ["CLUSTER", "COUNTKEYSINSLOT", "x"]),
        ("unknown-subcommand", ["CLUSTER", "FOO"]),
        ("info-cluster", ["INFO", "cluster"]),
        ("moved", ["GET", "foo"]),
        ("crossslot", ["MGET", "{a}1", "{b}1"]),
        ("readonly", ["READONLY"]),
        ("readwrite", ["READWRITE"]),
        ("asking", ["ASKING"]),
    ]:
        save("%s.resp%d" % (name, proto), call(s, *args))
    s.close()
