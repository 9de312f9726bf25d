"""The one place where anything that may hang or crash runs: a forked, killable child.

What it establishes: whatever the code in the child does (raise anything, SystemExit
and KeyboardInterrupt included, call ``os._exit``, segfault, exhaust memory, hang in
C code where no signal handler ever runs, start grandchildren), the caller gets one
``Outcome`` by its deadline.  Every child is forked (POSIX ``fork``: nothing is
pickled on the way in), is the leader of a process group of its own, and the whole
group is killed with SIGKILL at the wall-clock deadline, so grandchildren die with
it; a child also dies with its parent (Linux's PR_SET_PDEATHSIG), so a harness
killed from outside leaves no hung child behind.  Its address space is capped (RLIMIT_AS, the memory mapped at the fork plus
``memory_bytes``), and its stdout and stderr go to /dev/null (the target's output
is noise) or to a file that is read back into ``Outcome.output``.

Two faces of the same child:

- ``TargetProcess``: the persistent worker of the search.  One child loads the
  target and serves many calls over a pipe, each with its own limit; a call that
  kills the child or overruns starts a fresh child on the next call.  It also reports
  whether a call modified its input (a pickle taken before and after the call).
  ``submit`` / ``collect`` split a call in two, so that the harness works (computes the
  reference, judges the previous outcome) while the child runs it; the call's limit
  runs from the submit, and an answer that ended after it (collected late) is
  ``timed_out``, exactly as if the child had been cut off there.  ``stream`` runs a list
  of calls so, one in flight at a time: each call still has its own limit and its own
  outcome, and the calls after one that killed or hung the child run in a fresh child.
- ``Child`` / ``run_once``: the one-shot runner.  It runs one function in a child
  with a deadline and returns its outcome, with every value the function handed to
  its ``report`` callback before the end (partial results survive a kill).

The outcome kinds, and the verdict each engine gives them (the one table; also in
docs/verify.md):

============  =====================================  ======================  ====================  ========
kind          search call (TargetProcess)            stateful test           CrossHair contract    Z3 claim
============  =====================================  ======================  ====================  ===============
returned      judged by spec.check (a result that    its finding, if any     the contract's own    the claim's own
              cannot be sent back: ``well_typed``)                           outcome               status
raised        ``validation`` (ValueError on a valid  harness error (exit 2)  ``unknown``           ``unknown``
              call; on an invalid one anything but                           (engine failed)       (with traceback)
              ValueError), else ``termination``
timed_out     ``termination``, but only once it is   ``incomplete`` (the     ``incomplete``        ``unknown``
              confirmed at the full per-call limit   check did not finish)   (cut short)
              in a fresh process (a short probe's
              timeout is not a finding)
died          ``termination``                        ``incomplete``          ``unknown``           ``unknown``
harness_error exit 2, never a FAIL charged to the    exit 2                  exit 2                exit 2
              target (``HarnessError`` is raised)
============  =====================================  ======================  ====================  ===============

``diff``'s CrossHair search keeps the differing calls it reported before any end, and
``verify --workers`` treats a worker like the search itself (its checks are
``incomplete`` if it does not answer by the deadline plus the minimiser's time).

``harness_error`` means the sandbox itself, not the code in the child, failed: the
child's side of the protocol raised, a message could not be pickled or unpickled
(a one-shot function's result included: that function is the harness's own code),
or the child could not be started.

``InProcessTarget`` is the exception: the target called in the harness's own
process, for the hypothesis-crosshair backend, with none of these guarantees.
=======
The child also reports whether the call modified its input, by comparing a pickle
of the input taken before the call with one taken after, and if so the arguments as
the call left them.

The time of a call is the target's own: right after loading the target the child
freezes the heap it inherited from the harness (``gc.freeze``), so the collector
never walks the harness's objects during a call.  Before that, a full collection
inside a call scanned (and copied on write) the whole inherited heap, which on a
loaded machine took long enough to meet the per-call limit on a correct target.
Each TargetProcess keeps the calls its current child has answered (``history``), so
a failure can be replayed on a fresh child after the same calls.

``harness_collector`` is the parent's side of the same concern: the search judges
inside it (the harness's heap frozen, young objects collected every 50 000
allocations instead of 700), and every child forked meanwhile is given back the
collector's usual thresholds before anything else runs in it.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import faulthandler
import gc
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import wait as _wait_connections
from typing import Any, Callable, NamedTuple

from proofs.targets import Target, TargetError, load_callable, signature_problem

DEFAULT_CALL_SECONDS = 1.0
DEFAULT_MEMORY_BYTES = 2 * 2**30
ENGINE_MEMORY_BYTES = 6 * 2**30  # CrossHair and Z3 children: a solver needs room, but not the machine
LOAD_SECONDS = 10.0
DEFAULT_SHAPE = (([], 1, True), "schedule(jobs, slots, continuous)")  # the chapter's model: example arguments, how a call is written
OUTPUT_CHARS = 20_000  # of captured output, the last ones kept

RETURNED, RAISED, TIMED_OUT, DIED, HARNESS_ERROR = "returned", "raised", "timed_out", "died", "harness_error"
KINDS = (RETURNED, RAISED, TIMED_OUT, DIED, HARNESS_ERROR)
OUTPUTS = ("devnull", "capture")

# True in a sandbox child: the children it starts stay in its process group, so that
# killing that group (which its own parent does, at its deadline or its end) kills them too
_state = {"nested": False, "collector": None}  # collector: the thresholds harness_collector replaced


class HarnessError(RuntimeError):
    """The sandbox (not the code it ran) failed: schedcheck's own error, exit 2, never a finding."""


class Outcome(NamedTuple):
    """What one run in a child did: one of ``KINDS`` and what came with it."""

    kind: str  # one of KINDS
    result: Any = None  # the returned value, for "returned"
    error: str = ""  # "ValueError: ...", the exit status, the limit met, why a result could not be sent
    error_type: str = ""  # the exception's class name, for "raised"
    mutated: bool = False  # the call modified its input (TargetProcess)
    partial: tuple = ()  # the values reported before the end (Child)
    output: str = ""  # the child's captured stdout and stderr (output="capture")
    seconds: float = 0.0  # wall-clock time from start to outcome (Child)
    traceback: str = ""  # for "raised" and "harness_error", where it is known

    @property
    def sendable(self) -> bool:
        """A returned value that reached the caller (False: it could not be pickled back)."""
        return self.kind == RETURNED and not self.error
    args_after: Any = None  # when mutated: the arguments as the call left them (None if they cannot be sent)


# --- the harness's own collector ----------------------------------------------------------------

HARNESS_GC_THRESHOLD = 50_000  # young objects between two collections while the harness judges (Python's default: 700)


@contextlib.contextmanager
def harness_collector():
    """Run the block with the harness's heap frozen (``gc.freeze``) and the young generation
    collected every ``HARNESS_GC_THRESHOLD`` allocations, then restore the collector as it was.

    The oracle allocates a state per tick; with Python's default threshold the collector ran
    every 700 of them and took 15 to 20% of the parent's time (measured: docs/performance.md).
    A child forked meanwhile gets the collector as it was before (``_child_collector``): the
    target's code runs under the interpreter's usual settings."""
    if _state["collector"] is not None:  # nested: the outer block has it already
        yield
        return
    saved = gc.get_threshold()
    _state["collector"] = saved
    gc.freeze()
    gc.set_threshold(HARNESS_GC_THRESHOLD, *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
        _state["collector"] = None


def _child_collector() -> None:
    """In a fresh child: the collector's thresholds as they were outside ``harness_collector``."""
    if _state["collector"] is not None:
        gc.set_threshold(*_state["collector"])
        _state["collector"] = None


# --- the process group, the memory cap, the output -------------------------------------------


def _memory_limit(memory_bytes: int | None) -> int | None:
    """The RLIMIT_AS for a child forked now: what this process maps plus ``memory_bytes``."""
    if memory_bytes is None:
        return None
    try:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        mapped = 0
    return mapped + memory_bytes


def _enter_child(memory_limit: int | None, output_fd: int | None) -> None:
    """In a fresh child: lead a process group of its own (unless nested), die with its parent, cap memory, redirect output."""
    _child_collector()
    _die_with_parent()
    if not _state["nested"]:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass  # the parent has already made it the leader
        _state["nested"] = True
    fd = output_fd if output_fd is not None else os.open(os.devnull, os.O_RDWR)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for target_fd in (1, 2):
        os.dup2(fd, target_fd)
    # Python-level streams too: the harness's own may be replaced (pytest's capture) or buffered
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
    if faulthandler.is_enabled():  # its file is the harness's stderr: a crash report goes to ours
        faulthandler.enable(file=sys.stderr)
    if memory_limit is not None:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        except (ValueError, OSError):
            pass  # a limit below what is mapped already, or not permitted: run without it


def _die_with_parent() -> None:
    """Ask the kernel (Linux) to SIGKILL this child when its parent dies, so that a harness
    killed from outside leaves no hung child behind; elsewhere, do without."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:
        os._exit(1)  # the parent died before the request: nobody waits for this child


def _adopt(process) -> None:
    """In the parent, right after the fork: make the child its group's leader (both sides do, so no race)."""
    if _state["nested"]:
        return  # a child of a sandbox child stays in that child's group
    try:
        os.setpgid(process.pid, process.pid)
    except OSError:
        pass  # it has done so itself, or it has exited already


def _kill_group(process) -> None:
    """SIGKILL the child's whole process group (grandchildren too), then reap the child."""
    if process is None:
        return
    if not _state["nested"]:  # a nested child shares our group: it is killed alone (the group dies with ours)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        if process.exitcode is None:
            os.kill(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.join(5.0)


def _exit_status(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # an exception whose __str__ raises
        text = "<unprintable>"
    return text if len(text) <= 300 else text[:297] + "..."


def _format_traceback(error: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(type(error), error, error.__traceback__))[-OUTPUT_CHARS:]
    except BaseException:  # a hostile exception: its class name will do
        return type(error).__name__


def _read_tail(handle) -> str:
    if handle is None:
        return ""
    try:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 4 * OUTPUT_CHARS))
        return handle.read().decode("utf-8", "replace")[-OUTPUT_CHARS:]
    except (OSError, ValueError):
        return ""


# --- the persistent worker of the search -------------------------------------------------------


def _serve(connection, target: Target, memory_limit: int | None, shape: tuple = None, adapter=None) -> None:
    """The worker's loop: load the target (wrapped by ``adapter``, if any), then answer calls until the pipe closes."""
    _enter_child(memory_limit, None)
    known = frozenset(sys.modules)  # the modules the harness has too: the target's own are not among them
    try:
        function = load_callable(target)
    except TargetError as error:
        connection.send(("load_error", str(error)))
        return
    problem = signature_problem(function, *(shape or DEFAULT_SHAPE))
    if adapter is not None and problem is None:
        function = adapter(function)  # e.g. an online factory, driven by proofs.online.driver in this child
    gc.freeze()  # the harness's heap (and the target's module) is never collected during a call
    connection.send(("ready", problem))
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        try:
            connection.send_bytes(_answer(function, request, known))
        except BaseException as error:  # the sandbox's own side failed: say so, never guess
            try:
                connection.send((HARNESS_ERROR, f"the worker failed: {type(error).__name__}: {_describe(error)}",
                                 _format_traceback(error)))
            except BaseException:
                return  # the pipe itself is gone: the parent sees a death


class _PlainPickler(pickle.Pickler):
    """Pickles a dict, list or tuple subclass that only the target's own modules define as its base
    type: the harness cannot import those modules, and the contract accepts any such subclass."""

    def __init__(self, file, known: frozenset) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.known = known

    def reducer_override(self, obj):
        if type(obj).__module__ not in self.known:
            for base in (dict, list, tuple):
                if isinstance(obj, base):
                    return base, (base(obj),)
        return NotImplemented


def _dumps(message, known: frozenset) -> bytes:
    buffer = io.BytesIO()
    _PlainPickler(buffer, known).dump(message)
    return buffer.getvalue()


def _answer(function, request, known: frozenset = frozenset()) -> bytes:
    """One call of the target, as the pickled message that answers it (ending with when the call
    ended, on the system-wide monotonic clock, so the parent can tell whether it met its limit)."""
    before = pickle.dumps(request)
    try:
        result = function(*request)
    except BaseException as error:  # the target may raise anything, SystemExit included
        ended = time.monotonic()
        mutated = _changed(before, request)
        return pickle.dumps((RAISED, type(error).__name__, _describe(error), mutated, _after(mutated, request), ended))
    ended = time.monotonic()
    mutated = _changed(before, request)
    try:
        return _dumps((RETURNED, result, mutated, "", _after(mutated, request), ended), known)
    except BaseException as error:  # a result that cannot be pickled: lambdas, generators, cycles of locks
        return pickle.dumps((RETURNED, None, mutated, f"{type(result).__name__}: {_describe(error)}",
                             _after(mutated, request), ended))


def _after(mutated: bool, request: tuple):
    """The arguments as a call left them, when it changed them and they can still be sent; else None."""
    if not mutated:
        return None
    try:
        pickle.dumps(request)
    except BaseException:  # the target put something unpicklable into its input
        return None
    return request


def _changed(before: bytes, request) -> bool:
    try:
        return pickle.dumps(request) != before
    except BaseException:  # the target put something unpicklable into its input
        return True


_END = object()  # the end of a stream of calls
_DIED = object()  # a submitted call whose child had gone already: collect reports the death
_RESEND = object()  # a submitted call whose child the harness closed: collect sends it again


class TargetProcess:
    """One target in a persistent child serving many calls, restarted whenever a call kills it."""

    def __init__(
        self,
        target: Target,
        call_seconds: float = DEFAULT_CALL_SECONDS,
        memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
        shape: tuple = None,
        adapter=None,
    ) -> None:
        if not (isinstance(call_seconds, (int, float)) and call_seconds > 0):
            raise ValueError(f"call_seconds={call_seconds!r}: expected a number of seconds > 0")
        if memory_bytes is not None and not (type(memory_bytes) is int and memory_bytes > 0):
            raise ValueError(f"memory_bytes={memory_bytes!r}: expected an int > 0 or None")
        self.target = target
        self.shape = shape or DEFAULT_SHAPE  # (example arguments, how a call is written) for the signature check
        self.adapter = adapter  # applied in the child to the loaded callable: what is called is adapter(target)
        self.call_seconds = call_seconds
        self.memory_bytes = memory_bytes
        self.calls = 0
        self.signature_problem: str | None = None
        self.history: list = []  # the calls sent to the current child, oldest first
        self._pending = None  # (args, seconds, limit, deadline, outcome known already) of the call submitted, not collected
        self._process = None
        self._connection = None

    def start(self) -> None:
        """Start the child and load the target; raise TargetError if it cannot be loaded."""
        context = multiprocessing.get_context("fork")
        parent_end, child_end = context.Pipe()
        process = context.Process(target=_serve, args=(child_end, self.target, _memory_limit(self.memory_bytes), self.shape, self.adapter))
        process.start()
        _adopt(process)
        child_end.close()
        self._process, self._connection = process, parent_end
        self.history = []  # a new list: one taken from the old child stays as it was
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

    def call(self, *args, seconds: float | None = None) -> Outcome:
        """Call the target once with ``args``, within ``seconds`` (default: the process's per-call limit)."""
        self.submit(*args, seconds=seconds)
        return self.collect()

    def submit(self, *args, seconds: float | None = None) -> None:
        """Send one call to the child and return at once; ``collect`` gives its outcome.  The call's
        limit runs from now, so the harness may do other work (judge, compute the reference) meanwhile."""
        assert self._pending is None, "TargetProcess.submit: the previous call was not collected"
        if self._process is None:
            self.start()
        self.calls += 1
        limit = self.call_seconds if seconds is None else seconds
        self.history.append(args)
        try:
            self._connection.send(args)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._pending = (args, seconds, limit, None, _DIED)
            return
        except BaseException as error:  # the harness handed over a call it cannot pickle
            self.close()
            self._pending = (args, seconds, limit, None, Outcome(
                HARNESS_ERROR, error=f"the call could not be sent: {type(error).__name__}: {_describe(error)}"))
            return
        self._pending = (args, seconds, limit, time.monotonic() + limit, None)

    def collect(self) -> Outcome:
        """The outcome of the call ``submit`` sent: its answer, or ``timed_out`` once its limit
        (counted from the submit) has passed, or ``died``."""
        assert self._pending is not None, "TargetProcess.collect: no call was submitted"
        args, seconds, limit, deadline, ready = self._pending
        self._pending = None
        if ready is _RESEND:  # the harness closed the child while the call ran: it runs again, in a fresh child
            self.calls -= 1
            self.submit(*args, seconds=seconds)
            return self.collect()
        if ready is _DIED:
            return self._died()
        if ready is not None:
            return ready
        if not self._connection.poll(max(0.0, deadline - time.monotonic())):
            self.close()
            return Outcome(TIMED_OUT, error=f"did not return within {limit:g} s")
        try:
            message = self._connection.recv()
        except (EOFError, OSError):
            return self._died()
        except BaseException as error:  # a result pickled in the child but not loadable here
            return Outcome(RETURNED, error=f"{type(error).__name__}: {_describe(error)}")
        kind = message[0]
        if kind in (RETURNED, RAISED) and message[5] > deadline:
            # it ended after its limit (the harness collected it late): as if it had been cut off there
            self.close()
            return Outcome(TIMED_OUT, error=f"did not return within {limit:g} s")
        if kind == RETURNED:
            return Outcome(RETURNED, result=message[1], mutated=message[2], error=message[3], args_after=message[4])
        if kind == RAISED:
            return Outcome(RAISED, error=f"{message[1]}: {message[2]}", error_type=message[1], mutated=message[3],
                           args_after=message[4])
        self.close()
        if kind == HARNESS_ERROR:
            return Outcome(HARNESS_ERROR, error=message[1], traceback=message[2])
        return Outcome(HARNESS_ERROR, error=f"the worker sent a message of unknown kind {kind!r}")

    def stream(self, calls, seconds: float | None = None):
        """Yield ``(call, outcome)`` for each call of ``calls`` in order, the next call already
        running in the child while the caller handles an outcome (each call is sent alone, with its
        own limit: one that hangs or kills the child is the one charged, and the calls after it
        run in a fresh child, exactly as with ``call``)."""
        calls = iter(calls)
        current = next(calls, _END)
        if current is _END:
            return
        self.submit(*current, seconds=seconds)
        try:
            while current is not _END:
                outcome = self.collect()
                following = next(calls, _END)
                if following is not _END:
                    self.submit(*following, seconds=seconds)
                yield current, outcome
                current = following
        finally:
            if self._pending is not None:  # the caller stopped early: the call sent ahead still ends here
                self.collect()

    def _died(self) -> Outcome:
        process = self._process
        process.join(1.0)
        status = _exit_status(process.exitcode)
        self.close()
        return Outcome(DIED, error=f"the target's process died ({status})")

    def close(self) -> None:
        """Kill the child's process group (if any); the next call starts a fresh child."""
        if self._pending is not None and self._pending[4] is None:  # a call in flight: collect runs it again
            self._pending = self._pending[:4] + (_RESEND,)
        if self._process is not None:
            _kill_group(self._process)
            self._connection.close()
        self._process = self._connection = None

    def __enter__(self) -> "TargetProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# --- the one-shot runner --------------------------------------------------------------------------


def _run_child(connection, function, args, kwargs, memory_limit, output_fd, partial) -> None:
    """The one-shot child: run ``function`` once, send every report and then the end."""
    try:
        _enter_child(memory_limit, output_fd)
        if partial:
            kwargs = dict(kwargs, report=lambda value: connection.send(("partial", value)))
    except BaseException as error:
        _send_end(connection, (HARNESS_ERROR, f"the child could not be set up: {type(error).__name__}: "
                                              f"{_describe(error)}", _format_traceback(error)))
    else:
        try:
            result = function(*args, **kwargs)
        except BaseException as error:  # the code may raise anything, SystemExit included
            _send_end(connection, (RAISED, type(error).__name__, _describe(error), _format_traceback(error)))
        else:
            try:
                payload = pickle.dumps(result)
            except BaseException as error:
                _send_end(connection, (HARNESS_ERROR, f"the result could not be sent back: {type(error).__name__}: "
                                                      f"{_describe(error)}", ""))
            else:
                _send_end(connection, (RETURNED, payload))
    os._exit(0)  # no atexit handlers or buffered output of the harness inherited by the fork


def _send_end(connection, message) -> None:
    try:
        connection.send(message)
        connection.close()
    except BaseException:  # the parent went away: nothing to tell
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass


class Child:
    """One run of ``function(*args, **kwargs)`` in a forked child, killed with its group at ``seconds``.

    With ``partial=True`` the function is also given ``report=callable``: every value
    it reports reaches ``Outcome.partial``, even if the child is killed afterwards.
    """

    def __init__(
        self,
        function: Callable,
        args: tuple = (),
        kwargs: dict | None = None,
        *,
        seconds: float,
        memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
        output: str = "devnull",
        partial: bool = False,
    ) -> None:
        if not callable(function):
            raise ValueError(f"function={function!r}: expected a callable")
        if not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0):
            raise ValueError(f"seconds={seconds!r}: expected a number of seconds > 0")
        if memory_bytes is not None and not (type(memory_bytes) is int and memory_bytes > 0):
            raise ValueError(f"memory_bytes={memory_bytes!r}: expected an int > 0 or None")
        if output not in OUTPUTS:
            raise ValueError(f"output={output!r}: expected one of {OUTPUTS}")
        self.function, self.args, self.kwargs = function, tuple(args), dict(kwargs or {})
        self.seconds, self.memory_bytes, self.output, self.partial = seconds, memory_bytes, output, partial
        self.started = self.deadline = None
        self.outcome: Outcome | None = None
        self._reports: list = []
        self._process = self._connection = self._file = None

    def start(self) -> "Child":
        """Fork the child; its deadline starts now."""
        assert self._process is None, "Child.start: already started"
        self._file = tempfile.TemporaryFile() if self.output == "capture" else None
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        output_fd = self._file.fileno() if self._file is not None else None
        self.started = time.monotonic()
        self.deadline = self.started + self.seconds
        try:
            process = context.Process(
                target=_run_child,
                args=(send, self.function, self.args, self.kwargs, _memory_limit(self.memory_bytes),
                      output_fd, self.partial),
            )
            process.start()
        except OSError as error:  # no fork (out of processes or memory): the sandbox failed
            receive.close()
            send.close()
            self._end(Outcome(HARNESS_ERROR, error=f"the child could not be started: {error}"))
            return self
        _adopt(process)
        send.close()
        self._process, self._connection = process, receive
        return self

    @property
    def waitables(self) -> list:
        """What ``multiprocessing.connection.wait`` can wait on for this child."""
        if self.outcome is not None or self._process is None:
            return []
        return [self._connection, self._process.sentinel]

    def poll(self) -> Outcome | None:
        """The outcome if the child has ended (or its deadline has passed, and it is killed), else None."""
        if self.outcome is not None:
            return self.outcome
        if self._process is None:
            self.start()
            if self.outcome is not None:
                return self.outcome
        end = self._drain()
        if end is not None:
            return self._finish(end)
        if self._process.exitcode is not None:
            end = self._drain()  # a last message may have arrived with the exit
            return self._finish(end if end is not None else ("__died__",))
        if time.monotonic() >= self.deadline:
            end = self._drain()
            return self._finish(end if end is not None else ("__timed_out__",))
        return None

    def wait(self) -> Outcome:
        """Block until the child ends or its deadline passes; return the outcome."""
        while True:
            outcome = self.poll()
            if outcome is not None:
                return outcome
            _wait_connections(self.waitables, timeout=max(0.0, min(1.0, self.deadline - time.monotonic())))

    def kill(self, why: str = "stopped by the caller") -> Outcome:
        """End the child now (if it has not ended); a run stopped early is ``timed_out``."""
        if self.outcome is None:
            if self._process is None:
                return self._end(Outcome(TIMED_OUT, error=f"never started: {why}"))
            end = self._drain()
            self._finish(end if end is not None else ("__timed_out__", why))
        return self.outcome

    def _drain(self):
        """Read every message waiting on the pipe; return the final one, if it came."""
        try:
            while self._connection.poll():
                message = self._connection.recv()
                if message[0] == "partial":
                    self._reports.append(message[1])
                else:
                    return message
        except (EOFError, OSError):
            return None
        except BaseException as error:  # a message that cannot be unpickled here
            return (HARNESS_ERROR, f"a message from the child could not be read: {type(error).__name__}: "
                                   f"{_describe(error)}", "")
        return None

    def _finish(self, end) -> Outcome:
        process = self._process
        if end[0] in ("__died__",):
            process.join(1.0)
        _kill_group(process)  # grandchildren die with it, whatever the child did
        self._connection.close()
        seconds = round(time.monotonic() - self.started, 3)
        kind = end[0]
        if kind == RETURNED:
            try:
                outcome = Outcome(RETURNED, result=pickle.loads(end[1]))
            except BaseException as error:
                outcome = Outcome(HARNESS_ERROR, error=f"the result could not be read back: {type(error).__name__}: "
                                                       f"{_describe(error)}")
        elif kind == RAISED:
            outcome = Outcome(RAISED, error=f"{end[1]}: {end[2]}", error_type=end[1], traceback=end[3])
        elif kind == HARNESS_ERROR:
            outcome = Outcome(HARNESS_ERROR, error=end[1], traceback=end[2])
        elif kind == "__timed_out__":
            why = end[1] if len(end) > 1 else f"did not end within {self.seconds:g} s"
            outcome = Outcome(TIMED_OUT, error=why)
        else:
            outcome = Outcome(DIED, error=f"the child died ({_exit_status(process.exitcode)})")
        output = _read_tail(self._file)
        if self._file is not None:
            self._file.close()
        return self._end(outcome._replace(output=output, seconds=seconds))

    def _end(self, outcome: Outcome) -> Outcome:
        self.outcome = outcome._replace(partial=tuple(self._reports))
        return self.outcome

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc_info) -> None:
        self.kill()


def run_once(function: Callable, *args, seconds: float, memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
             output: str = "devnull", partial: bool = False, **kwargs) -> Outcome:
    """Run ``function(*args, **kwargs)`` once in a killable child and return its outcome by ``seconds``."""
    with Child(function, args, kwargs, seconds=seconds, memory_bytes=memory_bytes, output=output,
               partial=partial) as child:
        child.start()
        return child.wait()


def wait_any(children: list[Child], timeout: float) -> None:
    """Block until one of ``children`` may have ended, its deadline has come, or ``timeout`` has passed."""
    waitables = [w for child in children for w in child.waitables]
    if not waitables:
        return
    soonest = min(child.deadline for child in children if child.outcome is None)
    _wait_connections(waitables, timeout=max(0.0, min(timeout, soonest - time.monotonic())))


# --- the target in the harness's own process ---------------------------------------------------------


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
        self._pending = None

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
            return Outcome(RAISED, error=f"{type(error).__name__}: {error}", error_type=type(error).__name__)
        except Exception as error:  # the target's failure is a finding, not ours
            mutated = repr(request) != before
            return Outcome(RAISED, error=f"{type(error).__name__}: {_describe(error)}",
                           error_type=type(error).__name__, mutated=mutated, args_after=request if mutated else None)
        mutated = repr(request) != before
        return Outcome(RETURNED, result=result, mutated=mutated, args_after=request if mutated else None)

    def submit(self, *args, seconds: float | None = None) -> None:
        """Keep the call for ``collect``, which makes it (nothing runs beside the harness here)."""
        assert self._pending is None, "InProcessTarget.submit: the previous call was not collected"
        self._pending = args

    def collect(self) -> Outcome:
        """Make the call ``submit`` kept and return its outcome."""
        args, self._pending = self._pending, None
        return self.call(*args)

    def close(self) -> None:
        pass

    def __enter__(self) -> "InProcessTarget":
        return self

    def __exit__(self, *exc_info) -> None:
        pass
