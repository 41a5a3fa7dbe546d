#!/usr/bin/env python3
"""A gateway that sends its own X-Request-Id (as vLLM's proxies send a uuid4), for
tests/test_conform.c: usage  xrid_proxy.py PORT -- CMD...  starts CMD with
`--listen 127.0.0.1:P` on a free port P, waits until P accepts, then serves 127.0.0.1:PORT by
forwarding every request to P with X-Request-Id replaced by a fresh uuid4. Whole responses only
(non-stream scenarios). Stops CMD on SIGTERM."""
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
    cmd = sys.argv[sys.argv.index("--") + 1:]
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
            req = urllib.request.Request("http://127.0.0.1:%d%s" % (up, self.path), data=body,
                                         method="POST")
            req.add_header("Content-Type", "application/json")
            req.add_header("X-Request-Id", uuid.uuid4().hex)
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
