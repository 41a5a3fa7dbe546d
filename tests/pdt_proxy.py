#!/usr/bin/env python3
"""A gateway in front of a gateway, for tests/test_conform*.c:
  pdt_proxy.py PORT [--rewrite-id] [--delay-ms N] -- CMD...
starts CMD with `--listen 127.0.0.1:P` on a free port P, waits until P accepts, then serves
127.0.0.1:PORT by forwarding every POST to P: with --rewrite-id, X-Request-Id replaced by a fresh
uuid4 (as vLLM's proxies send their own), with --delay-ms, N ms later (a slow gateway). Whole
responses only (non-stream scenarios). Stops CMD on SIGTERM."""
import http.server
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    port = int(sys.argv[1])
    opts = sys.argv[2:sys.argv.index("--")]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    rewrite = "--rewrite-id" in opts
    delay = float(opts[opts.index("--delay-ms") + 1]) / 1000 if "--delay-ms" in opts else 0
    up = free_port()
    child = subprocess.Popen(cmd + ["--listen", "127.0.0.1:%d" % up])
    for _ in range(500):  # bounded: 10 s
        try:
            socket.create_connection(("127.0.0.1", up), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.02)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if delay:
                time.sleep(delay)
            req = urllib.request.Request("http://127.0.0.1:%d%s" % (up, self.path), data=body,
                                         method="POST")
            req.add_header("Content-Type", "application/json")
            xrid = self.headers.get("X-Request-Id")
            if rewrite:
                xrid = uuid.uuid4().hex
            if xrid:
                req.add_header("X-Request-Id", xrid)
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    status, data = r.status, r.read()
            except urllib.error.HTTPError as e:
                status, data = e.code, e.read()
            except OSError:
                status, data = 502, b'{"error":{"message":"proxy: upstream failed"}}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)

    def stop(*_):
        child.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    srv.serve_forever()


if __name__ == "__main__":
    main()
