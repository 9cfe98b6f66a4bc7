"""A throwaway PostgreSQL server in a temporary folder, for the tests and ``memtier bench shared``.

The version's own ``initdb`` and ``pg_ctl`` (``pg_config --bindir``, else ``/usr/lib/postgresql/*/bin``),
never a packaged cluster. ``initdb`` refuses to run as root, so as root the folder is given to the
``postgres`` user and the commands run through ``runuser -u postgres --``. The server listens on
127.0.0.1 at a free port (real TCP, as hosts reach an engine), with a superuser ``memtier`` (the
owner, who runs ``memtier shared init``) and :meth:`Server.add_role` for plain application roles.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def find_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10).stdout.strip()
            if out and (Path(out) / "initdb").exists():
                return Path(out)
        except (OSError, subprocess.SubprocessError):
            pass
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3])
                   if Path(p).parts[-3].isdigit() else 0)
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """initdb + pg_ctl start in a temp folder; :meth:`stop`, :meth:`start` again, :meth:`destroy`."""

    def __init__(self, bindir: Path | None = None):
        self.bindir = bindir or find_bindir()
        if self.bindir is None:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb); install the postgresql package")
        self.dir = Path(tempfile.mkdtemp(prefix="memtier-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self._as = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            os.chmod(self.dir, 0o755)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "memtier", "--no-sync", "-E", "UTF8",
                  "--locale=C.UTF-8")
        self.start()

    def _run(self, tool: str, *args: str, timeout: float = 60) -> None:
        cmd = [*self._as, str(self.bindir / tool), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{tool} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-500:]}")

    def start(self) -> None:
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
                "-c max_connections=200 -c shared_buffers=32MB")
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-l", str(self.dir / "log"), "-o", opts, "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-m", mode, "stop")

    def dsn(self, user: str = "memtier", db: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"

    def sql(self, statement: str, db: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.dsn(db=db), autocommit=True) as conn:
            conn.execute(statement)

    def add_role(self, name: str) -> str:
        """A plain login role (no superuser, no BYPASSRLS); returns its DSN."""
        self.sql(f'DO $$ BEGIN CREATE ROLE "{name}" LOGIN NOSUPERUSER NOBYPASSRLS; '
                 "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        return self.dsn(user=name)

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except (RuntimeError, subprocess.SubprocessError, OSError):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def wait_port(port: int, timeout: float = 10.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False
