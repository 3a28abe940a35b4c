"""What a run leaves in its directory, written atomically.

- metrics.jsonl: one row per evaluation (per model), appended and flushed; a resumed run
  truncates rows past its checkpoint. Some of a row's columns are the machine's measurements
  (seconds, rates, memory, utilisation: `machine_column`), which no comparison of results reads.
- tensorboard/<name>-seed<seed>/: the same rows as TensorBoard scalars (`tensorboard --logdir
  results/<scale>/runs`), tag `<key>/<model>` (val_accuracy/0, comm_bytes/G, ...) at x = the update,
  and the config as hyperparameters and text; rewritten with the rows when a run resumes.
- summary.json: written last, only by a run that finished, so its presence means complete; it
  records metrics.jsonl's rows, last step and digest (`metrics_record`), which the analysis checks.
- Every write into the directory is guarded (`RunGuard`): a run whose directory (or lock file,
  or metrics.jsonl) was removed or replaced under it writes nothing more (`RunGone`), and an
  OSError of a write names the file and the operation (`WriteError`).
- manifest.json: resolved config, seed, git commit, package versions, hardware (CPU model, torch's CPU
  capability, BLAS, threads), launcher.
- logs/rank<N>.log: each rank's stdout and stderr (when `codist run` started it).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path


_UMASK = os.umask(0)
os.umask(_UMASK)
LOCK = ".codist.lock"   # a run directory's lock file (codist.launching.rundir); its presence marks a run directory
# A column the machine measures, named by its unit: seconds (`_s`, `_s_...`: wall_s, wall_s_to_target),
# rates per second (`_per_s`), megabytes (`_mb`) and model-FLOPs utilisation (`mfu`). They differ between
# machines and between runs of one machine, so a rerun is compared with the committed results
# (workflows/compare.py), and a resumed run with an uninterrupted one, without them.
MACHINE_COLUMN = re.compile(r"_s(_|$)|_mb$|^mfu$")


def machine_column(name: str) -> bool:
    return bool(MACHINE_COLUMN.search(name))


def without_machine_columns(row: dict) -> dict:
    """A metrics row's results alone: what two runs of one config must agree on."""
    return {k: v for k, v in row.items() if not machine_column(k)}


class WriteError(OSError):
    """A write into a run's directory failed (a full disk, say): the message names the file, the
    operation and the error, in one line."""

    def __str__(self) -> str:
        return str(self.strerror)


class RunGone(RuntimeError):
    """This run's directory, its lock file or its metrics.jsonl was removed or replaced while it
    ran (`rm -rf`, a rerun of its workflow job): the run writes nothing more. `directory`: whether
    the directory itself is gone or another (False: only a file in it)."""

    def __init__(self, message: str, directory: bool):
        super().__init__(message)
        self.directory = directory


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


@contextlib.contextmanager
def naming(path: str | os.PathLike, operation: str):
    """An OSError inside becomes a WriteError naming `path` and `operation`."""
    try:
        yield
    except OSError as e:
        raise write_error(e, operation, path) from None


class RunGuard:
    """The run directory as this rank found it when it started: the directory's identity (device,
    inode) and its lock file's, which this rank holds open so that its inode cannot be reused while
    the run lives. `check(path)` before every write of metrics, checkpoints, models and the summary
    raises RunGone when either changed or vanished, so a run never writes into a directory that is
    no longer its own (another run's, or none)."""

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        with naming(self.out / LOCK, "open"):
            self.lock_fd = os.open(self.out / LOCK, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666 & ~_UMASK)
            self.ids = (_identity(os.stat(self.out)), _identity(os.fstat(self.lock_fd)))

    def problem(self) -> str | None:
        """Why the directory is no longer this run's, or None."""
        for path, was, what in ((self.out, self.ids[0], self.out), (self.out / LOCK, self.ids[1], f"{self.out}'s {LOCK}")):
            try:
                now = _identity(os.stat(path))
            except FileNotFoundError:
                return f"{what} was removed while this run was writing to it"
            except OSError as e:
                return f"{path}: cannot check it ({e.strerror})"
            if now != was:
                return f"{what} was replaced while this run was writing to it"
        return None

    def check(self, path: str | os.PathLike) -> None:
        why = self.problem()
        if why:
            raise RunGone(f"{why}; stopped before writing {Path(path).name}, nothing more written", directory=True)


def _fsync_dir(folder: Path) -> None:
    """fsync a folder, so that a rename in it survives a crash of the machine too."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write to a temp file in the same directory, fsync, then rename over `path`."""
    atomic_write_bytes(path, text.encode())


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temp file in the same directory, fsync, then rename over `path`."""
    _atomic(path, lambda f: f.write(data))


def _atomic(path: str | os.PathLike, write) -> None:
    """`write(f)` into a temp file in `path`'s directory, fsync, rename over `path`, fsync the
    directory; an OSError is a WriteError naming `path` and the step, and leaves no temp file."""
    path = Path(path)
    tmp, step = None, "create the folder of"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        step = "create a temporary file for"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~_UMASK)   # mkstemp makes 0600; results are shared files
        with os.fdopen(fd, "wb") as f:
            step = "write"
            sink = _Sink(f)
            try:
                write(sink)
                f.flush()
            except Exception:   # torch's zip writer hides the OSError of a full disk: raise that one
                if sink.error is not None:
                    raise sink.error from None
                raise
            step = "fsync"
            os.fsync(f.fileno())
        step = "rename into place"
        os.replace(tmp, path)
        tmp = None
        step = "fsync the folder of"
        _fsync_dir(path.parent)
    except OSError as e:
        raise write_error(e, step, path) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def write_error(e: OSError, operation: str, path: str | os.PathLike) -> WriteError:
    """'cannot write PATH (ENOSPC: No space left on device)' as a WriteError (one already is kept)."""
    if isinstance(e, WriteError):
        return e
    code = errno.errorcode.get(e.errno, e.errno) if e.errno else type(e).__name__
    return WriteError(e.errno, f"cannot {operation} {path} ({code}: {e.strerror or e})")


class _Sink:
    """A file object that remembers the first OSError of its writes (torch.save calls `write`
    from C++ and reports a failed one as 'unexpected pos ...', without the errno)."""

    def __init__(self, f):
        self.f, self.error = f, None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = self.error or e
            raise

    def flush(self) -> None:
        try:
            self.f.flush()
        except OSError as e:
            self.error = self.error or e
            raise


@contextlib.contextmanager
def file_lock(path: str | os.PathLike):
    """An exclusive lock on a lock file: processes (ranks) that build the same cached file wait
    for the first one instead of all building it. Yields whether it holds the lock: where the file
    system refuses flock (Lustre or NFS without lock support: ENOSYS, EOPNOTSUPP, ENOLCK) it warns
    in one line and yields False, since the caches only save work (each writes a temporary file
    and renames it into place), so ranks may then build the same file at once."""
    import fcntl
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError as e:
            print(f"codist: warning: cannot lock {path} ({lock_error(e)}); building the cache without the "
                  f"lock (ranks may build it at once): put the cache on a file system with working locks",
                  file=sys.stderr)
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def lock_error(e: OSError) -> str:
    """'ENOSYS: Function not implemented' for an OSError from flock."""
    return f"{errno.errorcode.get(e.errno, e.errno)}: {e.strerror or e}"


def atomic_torch_save(obj, path: str | os.PathLike) -> None:
    """torch.save to a temp file in the same directory, fsync, then rename over `path`: a crash
    leaves the old file or the new one, never a renamed file whose data never reached the disk."""
    import torch
    _atomic(path, lambda f: torch.save(obj, f))


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


class MetricsLog:
    """Appends JSON rows to metrics.jsonl; each row is one line, flushed and fsynced. Each row
    also goes to the TensorBoard event file under tensorboard/ beside it (flushed per row).
    `config`: the run's resolved config (codist.config.to_dict), which names the TensorBoard run
    and is logged as its hyperparameters. `guard`: the run's RunGuard, checked before every write.
    The file is this log's own from `replace` on: an append never creates it, and one that finds it
    removed or replaced (a rerun of the workflow job deleted it) raises RunGone instead of starting
    a file that would hold only the later rows."""

    def __init__(self, path: str | os.PathLike, config: dict | None = None, guard: RunGuard | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.events = TensorBoardLog(self.path.parent / "tensorboard", config)
        self.guard = guard
        self.identity = None   # the file `replace` wrote (None: appends may create it, as before)

    def append(self, row: dict) -> None:
        if self.guard is not None:
            self.guard.check(self.path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | (0 if self.identity else os.O_CREAT)
        try:
            fd = os.open(self.path, flags, 0o666 & ~_UMASK)
        except FileNotFoundError:
            raise RunGone(f"{self.path} was removed while this run was writing it; stopped without "
                          f"writing a summary", directory=False) from None
        except OSError as e:
            raise write_error(e, "open", self.path) from None
        try:
            if self.identity and _identity(os.fstat(fd)) != self.identity:
                raise RunGone(f"{self.path} was replaced while this run was writing it; stopped without "
                              f"writing a summary", directory=False)
            with naming(self.path, "append a row to"):
                data = rows_bytes([row])
                if os.write(fd, data) != len(data):
                    raise OSError(errno.EIO, "short write")
                os.fsync(fd)
        finally:
            os.close(fd)
        with naming(self.events.folder, "write TensorBoard events to"):   # its writer thread's OSError
            self.events.add(row)

    def replace(self, rows: list[dict]) -> None:
        """Start the file over with `rows` (none for a fresh run; a checkpoint's for a resumed one)."""
        if self.guard is not None:
            self.guard.check(self.path)
        atomic_write_bytes(self.path, rows_bytes(rows))
        self.identity = _identity(os.stat(self.path))
        with naming(self.events.folder, "write TensorBoard events to"):
            self.events.restart(rows)


def metrics_record(data: bytes) -> dict:
    """What summary.json records of metrics.jsonl's bytes: its rows, their last step and its
    SHA-256, so that the analysis can tell the metrics a run finished with from any others."""
    import hashlib
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    last = json.loads(lines[-1]).get("step") if lines else None
    return {"rows": len(lines), "last_step": last, "sha256": hashlib.sha256(data).hexdigest()}


def rows_bytes(rows: list[dict]) -> bytes:
    """metrics.jsonl's bytes for `rows`, as MetricsLog writes them."""
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def tensorboard_label(config: dict) -> str:
    """A run's TensorBoard name: its config name (the workflow's says workload, algorithm, models,
    world size and seed) with its seed, not the run id's hash; TensorBoard names a run by its folder."""
    name, seed = str(config.get("name") or "run"), config.get("seed")
    if seed is not None and not name.endswith(f"seed{seed}"):
        name = f"{name}-seed{seed}"
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in name)


def hyperparameters(config: dict, prefix: str = "") -> dict[str, int | float | str | bool]:
    """The config as TensorBoard hparams: dotted keys; lists and None as text. `launch` and `name`
    are left out (they change no result, as in the run id)."""
    out = {}
    for key, value in config.items():
        if not prefix and key in ("launch", "name"):
            continue
        if isinstance(value, dict):
            out.update(hyperparameters(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value if isinstance(value, (int, float, str, bool)) else json.dumps(value)
    return out


def quiet_event_thread() -> None:
    """TensorBoard's event writer thread dies on an OSError (a full disk) with a traceback of its
    own; the rank's next add or flush raises the same error, which MetricsLog reports in one line.
    So the thread's traceback is left out (other threads' errors are printed as before)."""
    import threading
    from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread
    previous = threading.excepthook
    if getattr(previous, "codist_quiet", False):
        return

    def hook(args):
        if not (isinstance(args.thread, _AsyncWriterThread) and issubclass(args.exc_type, OSError)):
            previous(args)
    hook.codist_quiet = True
    threading.excepthook = hook


class TensorBoardLog:
    """Metrics rows as TensorBoard scalars: every numeric value of a row, tag `<key>/<model>`,
    at step = the row's update, in `<folder>/<tensorboard_label>/`; the config as the run's
    hyperparameters (HParams tab; its metrics are the scalars) and as text (tag `config`). Created
    on first use (torch.utils.tensorboard, lead rank only)."""

    SKIP = ("step", "model")

    def __init__(self, folder: Path, config: dict | None = None):
        self.root = folder
        self.config = config or {}
        self.folder = folder / tensorboard_label(self.config)
        self.writer = None

    def add(self, row: dict) -> None:
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter
            quiet_event_thread()
            self.writer = SummaryWriter(log_dir=str(self.folder))
            self._add_config()
        for key, value in row.items():
            if key not in self.SKIP and isinstance(value, (int, float)) and not isinstance(value, bool):
                # float64 tensors, not float32 simple_values: byte counts past 2^24 stay exact
                self.writer.add_scalar(f"{key}/{row['model']}", value, global_step=row["step"], new_style=True,
                                       double_precision=True)
        self.writer.flush()   # a live view: each evaluation is on disk when its row is

    def _add_config(self) -> None:
        if not self.config:
            return
        import yaml
        from torch.utils.tensorboard.summary import hparams
        # the session's start only: TensorBoard's HParams tab then takes the metrics from the
        # scalars and lists every run under one experiment (no per-run experiment summary)
        _, session_start, _ = hparams(hyperparameters(self.config), {})
        self.writer.file_writer.add_summary(session_start)
        text = yaml.safe_dump(self.config, sort_keys=False)
        self.writer.add_text("config", "".join(f"    {line}\n" for line in text.splitlines()))   # a code block

    def restart(self, rows: list[dict]) -> None:
        """The event files start over with `rows` (a resumed run drops what came after its checkpoint)."""
        import shutil
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        shutil.rmtree(self.root, ignore_errors=True)
        for row in rows:
            self.add(row)


RANK_LOG_DIR = "CODIST_RANK_LOG_DIR"   # set by codist.launching.launch to RUN/logs
_tees: list = []                       # rank 0's tee processes (kept: a dropped Popen warns)
_terminal: list = []                   # rank 0's terminal, when it started on one (for a progress bar)


def tee_rank_output() -> None:
    """Where `codist run` asks for it (CODIST_RANK_LOG_DIR), append this rank's stdout and
    stderr (file descriptors 1 and 2: Python's, C++'s and child processes' output alike) to
    RUN/logs/rank<N>.log. Rank 0's also still reach the launcher's output (the run's console or
    workflow log) through one `tee` per stream: separate processes, so a crash loses nothing,
    in their own session and ignoring stop signals, so a stop signal to the job (or to every
    process of a SLURM step) leaves them copying the rank's last words; they end when the rank
    closes its end."""
    import sys
    folder = os.environ.get(RANK_LOG_DIR)
    if not folder:
        return
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
    path = Path(folder) / f"rank{rank}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    if rank != "0":
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666 & ~_UMASK)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        return
    if os.isatty(2):   # a progress bar draws on the terminal itself, never into the log
        _terminal.append(os.dup(2))
    for fd in (1, 2):
        # stop signals ignored (inherited through exec): SLURM signals every process of a cancelled
        # step, and a tee that died first would turn the rank's checkpoint message into a BrokenPipeError
        tee = subprocess.Popen(["sh", "-c", "trap '' TERM INT HUP USR1; exec tee -a \"$0\"", str(path)],
                               stdin=subprocess.PIPE, stdout=fd, start_new_session=True)
        os.dup2(tee.stdin.fileno(), fd)
        tee.stdin.close()
        _tees.append(tee)


def terminal():
    """Rank 0's terminal as a text stream, if it started on one and its output now goes to a
    log too (tee_rank_output); else None."""
    if not _terminal:
        return None
    if isinstance(_terminal[0], int):
        _terminal[0] = os.fdopen(_terminal[0], "w", buffering=1)
    return _terminal[0]


PACKAGES = ("torch", "torchvision", "deepspeed", "numpy", "pydantic", "snakemake", "fairseq-fixed", "pandas")


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state(cwd: str | os.PathLike | None = None) -> dict:
    """Commit of the code that ran (and whether the tree was dirty); None outside git."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=cwd or Path(__file__).parent, capture_output=True,
                              text=True, timeout=10)
    try:
        head = git("rev-parse", "HEAD")
        if head.returncode:
            return {"commit": None, "dirty": None}
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip() != ""
        return {"commit": head.stdout.strip(), "dirty": dirty}
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    """The CPU's feature flags (/proc/cpuinfo's first `flags` line); empty where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def torch_build_setting(key: str) -> str | None:
    """One `KEY=value` of torch's build settings (torch.__config__.show()), e.g. BLAS_INFO."""
    import torch
    m = re.search(rf"\b{key}=([^,\s]+)", torch.__config__.show())
    return m.group(1) if m else None


def hardware() -> dict:
    """What a number can depend on besides the config: the CPU and the kernels torch picks on it
    (its CPU capability: AVX2 / AVX512 code paths give other floating-point sums), the BLAS torch
    was built with, and the threads this process runs (called after the rank set its threads)."""
    import torch
    info = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "blas": torch_build_setting("BLAS_INFO"),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cuda_available": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info
