#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A private clickhouse-server for tests: its own temporary directory for
data, configuration and logs, a free port on 127.0.0.1, no service, no
root needed. It can be killed (SIGKILL, as a crash) and started again on
the same data and port, mid-test.

    with ClickHouseServer() as server:
        urllib.request.urlopen(server.url + "/ping")

Run directly, it serves until interrupted and prints its URL:

    tests/clickhouse_server.py
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

BINARY = "clickhouse-server"

CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>{dir}/server.log</log>
        <errorlog>{dir}/server.err.log</errorlog>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>
    <path>{dir}/data/</path>
    <tmp_path>{dir}/tmp/</tmp_path>
    <user_files_path>{dir}/user_files/</user_files_path>
    <format_schema_path>{dir}/format_schemas/</format_schema_path>
    <mark_cache_size>67108864</mark_cache_size>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
</yandex>
"""

USERS = """<?xml version="1.0"?>
<yandex>
    <profiles><default/></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default/></quotas>
</yandex>
"""


def available():
    """Whether clickhouse-server is installed (scripts/deps installs it)."""
    return shutil.which(BINARY) is not None


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClickHouseServer:
    """One clickhouse-server process over a temporary directory. stop()
    (or leaving the with block) kills it and deletes the directory."""

    def __init__(self, start_timeout=30.0):
        self.start_timeout = start_timeout
        self.dir = tempfile.mkdtemp(prefix="copa-clickhouse.")
        self.http_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.process = None
        with open(os.path.join(self.dir, "config.xml"), "w") as f:
            f.write(CONFIG.format(dir=self.dir, http_port=self.http_port,
                                  tcp_port=free_port()))
        with open(os.path.join(self.dir, "users.xml"), "w") as f:
            f.write(USERS)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """Start the server on this directory and port; return once it
        answers /ping. Raise RuntimeError, with its log, if it exits or
        does not answer within start_timeout."""
        self.process = subprocess.Popen(
            [BINARY, f"--config-file={self.dir}/config.xml"],
            cwd=self.dir, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, "stderr.log"), "ab"),
            start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"clickhouse-server exited with "
                                   f"{self.process.returncode}:\n"
                                   f"{self.log_tail()}")
            if self.ping():
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"clickhouse-server did not answer on {self.url} "
                           f"within {self.start_timeout} s:\n"
                           f"{self.log_tail()}")

    def ping(self):
        try:
            with urllib.request.urlopen(self.url + "/ping", timeout=1) as r:
                return r.read() == b"Ok.\n"
        except (OSError, urllib.error.URLError):
            return False

    def kill(self):
        """SIGKILL the server, as a crash would stop it, and reap it."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def restart(self):
        """Kill the server, then start it again on the same data and port."""
        self.kill()
        self.start()

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def query(self, sql):
        """Run ``sql`` and return the server's answer as text; raise
        urllib.error.HTTPError with its message on error."""
        request = urllib.request.Request(self.url + "/",
                                         data=sql.encode())
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.read().decode()

    def log_tail(self, lines=20):
        text = ""
        for name in ("stderr.log", "server.err.log"):
            try:
                with open(os.path.join(self.dir, name)) as f:
                    text += "".join(f.readlines()[-lines:])
            except OSError:
                pass
        return text


def main():
    with ClickHouseServer() as server:
        print(f"{server.url} (data in {server.dir}); Ctrl-C stops it",
              flush=True)
        try:
            server.process.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
