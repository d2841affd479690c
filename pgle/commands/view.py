"""`pgle view RUN_FOLDER`: serve a run's kept trace with XProf, on 127.0.0.1 by default.

XProf's own launcher (xprof 2.24) binds every interface and starts a gRPC worker
on 0.0.0.0; pgle serves the same XProf plugin app itself, on the host it is
given, in a child process the caller can stop. Converting a trace needs no gRPC
worker when everything is local.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from pgle.errors import BadInput, PgleError
from pgle.report import Report

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8791  # XProf's own default
START_TIMEOUT_S = 60.0
INSTALL_HINT = "pip install 'pgle[xprof]'"
_READY = "PGLE_VIEW_READY"
_FAILED = "PGLE_VIEW_FAILED"
_MISSING = "XProf is not installed"


def find_logdir(run_folder: str | os.PathLike) -> Path:
    """The folder XProf wants: the one holding plugins/profile/<run>/*.xplane.pb."""
    folder = Path(run_folder)
    if not folder.is_dir():
        raise BadInput(f"run folder {folder} does not exist.")
    for candidate in (folder / "trace", folder):
        runs = candidate / "plugins" / "profile"
        if runs.is_dir() and any(runs.glob("*/*.xplane.pb")):
            return candidate.resolve()
    raise BadInput(
        f"{folder} holds no kept trace (no trace/plugins/profile/*/*.xplane.pb).",
        hint="Point at a run folder of `pgle collect`, or at a jax.profiler trace dir.",
    )


@dataclasses.dataclass
class ViewServer:
    process: subprocess.Popen
    host: str
    port: int
    logdir: Path
    log_path: str  # XProf's own log (request lines), kept until stop()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def wait(self) -> int:
        return self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)


def start(
    run_folder: str | os.PathLike,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    timeout: float = START_TIMEOUT_S,
) -> ViewServer:
    """Start XProf on the run folder's trace; returns once it listens (port 0: any free port)."""
    logdir = find_logdir(run_folder)
    if importlib.util.find_spec("xprof") is None:
        raise PgleError(f"{_MISSING}: {INSTALL_HINT}")
    fd, log_path = tempfile.mkstemp(prefix="pgle-view-", suffix=".log")
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the pgle package
    code = (
        f"import sys; sys.path.insert(0, {root!r}); from pgle.commands.view import _serve; _serve()"
    )
    with os.fdopen(fd, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(logdir), host, str(port)],
            # The child exits when this pipe closes, so it never outlives its parent.
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.PIPE,
            text=True,
            cwd=os.path.abspath(os.sep),
        )
    line = _first_line(proc, timeout)
    if line.startswith(_READY):
        return ViewServer(proc, host, int(line.split()[1]), logdir, log_path)
    proc.kill()
    proc.wait()
    detail = line[len(_FAILED) :].strip() if line.startswith(_FAILED) else _tail(log_path)
    os.unlink(log_path)
    if detail.startswith(_MISSING):
        raise PgleError(detail)
    raise PgleError(
        f"XProf did not start on {host}:{port}: {detail}",
        hint="Pick another --port (0 = any free port)." if "in use" in detail.lower() else None,
    )


def serve(
    run_folder: str | os.PathLike, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT
) -> Report:
    """Serve the run folder's trace until XProf exits or KeyboardInterrupt (Ctrl+C; the CLI
    turns SIGTERM into one too); status `error` (exit code 1) when XProf failed."""
    server = start(run_folder, host=host, port=port)
    try:
        # inside the try: a Ctrl+C the moment the URL shows is the same clean stop
        log.info(f"XProf serves {server.logdir} at {server.url} (Ctrl+C to stop)")
        code = server.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        server.stop()
    report = Report("view", "ok" if code in (0, -15) else "error", trace_dir=str(server.logdir))
    report.details["url"] = server.url
    if report.status == "error":
        report.exit_code = 1
        report.reasons.append(f"XProf exited with code {code}")
    return report


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    out: list[str] = []
    stdout = proc.stdout
    assert stdout is not None  # started with stdout=PIPE
    reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not out:
        return f"{_FAILED} no answer within {timeout:g} s"
    return out[0].strip() or f"{_FAILED} it exited with code {proc.wait()}"


def _tail(path: str) -> str:
    try:
        lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "no output"


def _serve() -> None:
    """Child process: argv = LOGDIR HOST PORT. Prints the ready line, then serves until killed.

    Uses xprof.server's pieces (TBContext, DataProvider, ProfilePluginLoader,
    make_wsgi_app; xprof 2.24.2) because its start_server() cannot bind one host.
    """
    logdir, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        from cheroot import wsgi
        from xprof import server as xs

        context = xs.TBContext(logdir, xs.DataProvider(logdir), xs.TBContext.Flags(False))
        # A local viewer: no button that would capture from a remote profiler.
        context.hide_capture_profile_button = True
        context.enable_tab_name_label = False
        context.src_prefix = None
        plugin = xs.ProfilePluginLoader().load(context)
        server = wsgi.Server((host, port), xs.make_wsgi_app(plugin))
        server.prepare()  # binds; port 0 becomes the real port
    except ImportError as e:
        print(f"{_FAILED} {_MISSING} ({e}): {INSTALL_HINT}", flush=True)
        sys.exit(1)
    except OSError as e:
        print(
            f"{_FAILED} port {port} on {host} is in use"
            if e.errno == errno.EADDRINUSE
            else f"{_FAILED} {e}",
            flush=True,
        )
        sys.exit(1)
    except Exception as e:  # an xprof whose internals moved: say so in one line
        print(f"{_FAILED} {type(e).__name__}: {e}", flush=True)
        sys.exit(1)
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    print(f"{_READY} {server.bind_addr[1]}", flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        server.stop()


def _exit_with_parent() -> None:
    sys.stdin.read()  # returns when the parent closes the pipe or dies
    os._exit(0)
