"""Starting and stopping a real `posy serve` for the end-to-end tests.

Each server gets a free loopback port (asked of the kernel, then passed with
--port) and is waited for on GET /health; stopping sends SIGTERM and checks
that the process drains and exits 0.
"""
import os
import signal
import socket
import subprocess
import time

import requests


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, *args, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = f"/tmp/posy-serve-test-{self.port}.log"
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "serve", "--model", model, "--host", "127.0.0.1", "--port", str(self.port), *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self._wait_ready()

    def _wait_ready(self, timeout=60):
        t_end = time.time() + timeout
        while time.time() < t_end:
            if self.proc.poll() is not None:
                raise AssertionError(f"posy serve exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise AssertionError(f"posy serve not ready after {timeout}s:\n{self.output()}")

    def output(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, timeout=30):
        """SIGTERM, wait, and return the exit code (the caller asserts it)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"posy serve did not exit {timeout}s after SIGTERM:\n{self.output()}")
        self.log.close()
        return self.proc.returncode

    def metric(self, name):
        """Value of an unlabelled or fully-labelled Prometheus sample."""
        for line in requests.get(self.url + "/metrics", timeout=5).text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return 0.0


def serve_each(binary, models, *args):
    """A generator for a module fixture: one `posy serve` per model folder
    (models: name -> path), yields name -> URL, then stops them all and
    asserts each exited 0."""
    servers = {}
    try:
        for name, path in models.items():
            servers[name] = Server(binary, path, *args)
        yield {name: s.url for name, s in servers.items()}
    finally:
        codes = {name: s.stop() for name, s in servers.items()}
    assert all(c == 0 for c in codes.values()), codes


def post_json(url, path, body, timeout=120):
    """POST `body` as JSON; (status, decoded JSON body) for success and error answers alike."""
    r = requests.post(url + path, json=body, timeout=timeout)
    return r.status_code, r.json()
