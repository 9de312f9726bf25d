"""Running a target scheduler so that nothing it does can hang or crash the harness.

The target lives in a forked child process.  Each call crosses a pipe and is bounded
by a wall-clock limit; a child that overruns it (even inside C code, where signals
are never delivered) is killed with SIGKILL and replaced.  The child's address space
is capped (RLIMIT_AS), its output goes to /dev/null, and every BaseException it
raises (SystemExit and KeyboardInterrupt included) is caught and reported, as is the
child dying outright (os._exit, a segfault).  The harness sees one of five outcomes.

The child also reports whether the call modified its input, by comparing a pickle
of the input taken before the call with one taken after.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import resource
import signal

from typing import Any, NamedTuple

from proofs.targets import Target, TargetError, load_callable, signature_problem

DEFAULT_CALL_SECONDS = 1.0
DEFAULT_MEMORY_BYTES = 2 * 2**30
LOAD_SECONDS = 10.0
DEFAULT_SHAPE = (([], 1, True), "schedule(jobs, slots, continuous)")  # the chapter's model


class Outcome(NamedTuple):
    """What one call of the target did."""

    kind: str  # "returned", "raised", "timeout", "died", "unpicklable"
    result: Any = None  # the returned value, for "returned"
    error: str = ""  # "ValueError: ...", the exit status, or why the result could not be sent
    error_type: str = ""  # the exception's class name, for "raised"
    mutated: bool = False  # the call modified its input


def _child(connection, target: Target, memory_bytes: int, shape: tuple, adapter=None) -> None:
    """The child's loop: load the target (wrapped by ``adapter``, if any), then answer calls until the pipe closes."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ValueError, OSError):
        pass  # a limit below what is mapped already, or not permitted: run without it
    try:
        function = load_callable(target)
    except TargetError as error:
        connection.send(("load_error", str(error)))
        return
    problem = signature_problem(function, *shape)
    if adapter is not None and problem is None:
        function = adapter(function)  # e.g. an online factory, driven by proofs.online.driver in this child
    connection.send(("ready", problem))
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        before = pickle.dumps(request)
        try:
            result = function(*request)
        except BaseException as error:  # the target may raise anything, SystemExit included
            connection.send(("raised", type(error).__name__, _describe(error), _changed(before, request)))
            continue
        mutated = _changed(before, request)
        try:
            connection.send(("returned", result, mutated))
        except BaseException as error:  # a result that cannot be pickled: lambdas, generators, cycles of locks
            connection.send(("unpicklable", f"{type(result).__name__}: {_describe(error)}", mutated))


def _describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # an exception whose __str__ raises
        text = "<unprintable>"
    return text if len(text) <= 300 else text[:297] + "..."


def _changed(before: bytes, request) -> bool:
    try:
        return pickle.dumps(request) != before
    except BaseException:  # the target put something unpicklable into its input
        return True


class TargetProcess:
    """One target in a child process, restarted whenever a call kills it."""

    def __init__(
        self,
        target: Target,
        call_seconds: float = DEFAULT_CALL_SECONDS,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        shape: tuple = DEFAULT_SHAPE,
        adapter=None,
    ) -> None:
        self.target = target
        self.adapter = adapter  # applied in the child to the loaded callable: what is called is adapter(target)
        self.shape = shape  # (example arguments, how the call is written) for the signature check
        self.call_seconds = call_seconds
        self.memory_bytes = memory_bytes
        self.calls = 0
        self.signature_problem: str | None = None
        self._process = None
        self._connection = None

    def start(self) -> None:
        """Start the child and load the target; raise TargetError if it cannot be loaded."""
        context = multiprocessing.get_context("fork")
        parent_end, child_end = context.Pipe()
        process = context.Process(target=_child, args=(child_end, self.target, self._memory_limit(), self.shape, self.adapter), daemon=True)
        process.start()
        child_end.close()
        self._process, self._connection = process, parent_end
        if not parent_end.poll(LOAD_SECONDS):
            self.close()
            raise TargetError(f"target {self.target.text!r}: import did not finish within {LOAD_SECONDS:g} s")
        try:
            message = parent_end.recv()
        except (EOFError, OSError):
            process.join(1.0)
            code = process.exitcode
            self.close()
            raise TargetError(f"target {self.target.text!r}: the process died while importing it ({_exit_status(code)})")
        if message[0] == "load_error":
            self.close()
            raise TargetError(message[1])
        self.signature_problem = message[1]

    def _memory_limit(self) -> int:
        try:
            with open("/proc/self/statm") as statm:
                mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            mapped = 0
        return mapped + self.memory_bytes

    def call(self, *args, seconds: float | None = None) -> Outcome:
        """Call the target once with ``args``, within ``seconds`` (default: the process's per-call limit)."""
        if self._process is None:
            self.start()
        self.calls += 1
        limit = self.call_seconds if seconds is None else seconds
        try:
            self._connection.send(args)
        except (BrokenPipeError, OSError):
            return self._died()
        if not self._connection.poll(limit):
            self.close()
            return Outcome("timeout", error=f"did not return within {limit:g} s")
        try:
            message = self._connection.recv()
        except (EOFError, OSError):
            return self._died()
        except BaseException as error:  # a result pickled in the child but not loadable here
            return Outcome("unpicklable", error=f"{type(error).__name__}: {error}")
        kind = message[0]
        if kind == "returned":
            return Outcome("returned", result=message[1], mutated=message[2])
        if kind == "raised":
            return Outcome("raised", error=f"{message[1]}: {message[2]}", error_type=message[1], mutated=message[3])
        return Outcome("unpicklable", error=message[1], mutated=message[2])

    def _died(self) -> Outcome:
        process = self._process
        process.join(1.0)
        status = _exit_status(process.exitcode)
        self.close()
        return Outcome("died", error=f"the target's process died ({status})")

    def close(self) -> None:
        """Kill the child (if any); the next call starts a fresh one."""
        if self._process is not None:
            if self._process.is_alive():
                os.kill(self._process.pid, signal.SIGKILL)
            self._process.join(5.0)
            self._connection.close()
        self._process = self._connection = None

    def __enter__(self) -> "TargetProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _exit_status(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"




class InProcessTarget:
    """The target called in the harness's own process, for the hypothesis-crosshair
    backend, whose symbolic values must reach the target's code unrealised (a pipe
    would turn them into concrete values).  Nothing is contained here: a hang or a
    crash of the target is one of the harness; use it only on trusted code."""

    def __init__(self, target: Target, shape: tuple = None) -> None:
        self.target = target
        self.shape = shape or DEFAULT_SHAPE
        self.calls = 0
        self.call_seconds = None
        self.signature_problem: str | None = None
        self._function = None

    def start(self) -> None:
        self._function = load_callable(self.target)
        self.signature_problem = signature_problem(self._function, *self.shape)

    def call(self, *args, seconds: float | None = None) -> Outcome:
        if self._function is None:
            self.start()
        self.calls += 1
        request = args
        before = repr(request)
        try:
            result = self._function(*args)
        except (KeyboardInterrupt, SystemExit) as error:
            return Outcome("raised", error=f"{type(error).__name__}: {error}", error_type=type(error).__name__)
        except Exception as error:  # the target's failure is a finding, not ours
            return Outcome("raised", error=f"{type(error).__name__}: {_describe(error)}",
                           error_type=type(error).__name__, mutated=repr(request) != before)
        return Outcome("returned", result=result, mutated=repr(request) != before)

    def close(self) -> None:
        pass

    def __enter__(self) -> "InProcessTarget":
        return self

    def __exit__(self, *exc_info) -> None:
        pass
