#!/usr/bin/env python3
"""Measures cirrusd's resident memory per idle connection.

Starts the given cirrusd binary on a free loopback port, opens N mutual-TLS connections that
each complete Hello/HelloAck and then sit idle, and prints the growth of the server's VmRSS
divided by N. Usage: Scripts/measure-idle-memory.py .build/release/cirrusd [N]
"""
import os
import socket
import ssl
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CERTS = os.path.join(ROOT, "Certs")
HELLO = bytes([0, 0, 0, 4, 0x12, 0x02, 0x08, 0x01])  # Frame{hello: Hello{protocol_version: 1}}
HELLO_ACK_KEY = 0x1A  # Frame field 3 (hello_ack), length-delimited; stream_id 0 is not sent


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def expect_hello_ack(conn):
    body = read_frame(conn)
    if not body or body[0] != HELLO_ACK_KEY:
        raise RuntimeError(f"expected HelloAck, got frame {body[:16].hex()}")


def read_frame(conn):
    header = b""
    while len(header) < 4:
        chunk = conn.recv(4 - len(header))
        if not chunk:
            raise RuntimeError("closed")
        header += chunk
    length = int.from_bytes(header, "big")
    body = b""
    while len(body) < length:
        body += conn.recv(length - len(body))
    return body


def main():
    binary = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    # Every connection is alice's: lift the per-user cap (256 by default), or the connections
    # past it would be refused at Hello and measure nothing.
    server = subprocess.Popen(
        [binary, "--port", "0", "--log-level", "error", "--max-connections-per-user", str(count + 1)],
        cwd=ROOT, stdout=subprocess.PIPE)
    try:
        line = server.stdout.readline().decode()
        port = int(line.strip().rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
        context.load_cert_chain(os.path.join(CERTS, "alice.pem"), os.path.join(CERTS, "alice-key.pem"))
        context.set_alpn_protocols(["cirrus/1"])
        # Warm up: one connection, so one-time costs (thread stacks, caches) are not counted.
        warm = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
        warm.sendall(HELLO)
        expect_hello_ack(warm)
        time.sleep(0.5)
        before = rss_kib(server.pid)
        connections = []
        for _ in range(count):
            conn = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
            conn.sendall(HELLO)
            expect_hello_ack(conn)
            connections.append(conn)
        time.sleep(1.0)
        after = rss_kib(server.pid)
        print(f"{count} idle connections: server RSS {before} KiB -> {after} KiB, "
              f"{(after - before) / count:.1f} KiB per connection")
        for conn in connections:
            conn.close()
        warm.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
