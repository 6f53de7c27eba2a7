"""The stand-ins a check calls instead of the student's functions held by a clean room.

:func:`remote_function` sends the arguments to the child
(:meth:`autograder.cleanroom_process.Sandbox.request`, :func:`autograder.codec.encode`),
rebuilds the reply's values (:func:`autograder.codec.decode`, which looks no name up),
copies the arguments after the call back into the grader's objects
(:func:`autograder.codec.write_back`) and returns the result, or raises the child's
exception as the builtin class of that name (:data:`EXCEPTIONS`). A reply whose values
cannot be rebuilt breaks the protocol: the child is ended and the notebook scores 0.
"""

from __future__ import annotations

import warnings

from . import codec

__all__ = ["EXCEPTIONS", "RemoteFunction", "remote_function"]


def _builtin_exceptions():
    import builtins

    return {
        name: cls
        for name, cls in vars(builtins).items()
        if isinstance(cls, type) and issubclass(cls, Exception)
    }


#: the exception classes a child's error may be raised as, by name: the builtin ones
#: (any other name becomes a plain stand-in class carrying it as a label)
EXCEPTIONS = _builtin_exceptions()


def _raise_like(error):
    """Re-raise the child's exception (a checked ``{"type", "message", "where"}``) as the
    builtin class of that name in :data:`EXCEPTIONS`, else as a stand-in ``Exception``
    subclass labelled with the name."""
    name, message = error["type"], error["message"]
    if error["where"]:
        message = message + "\n" + error["where"].rstrip()
    cls = EXCEPTIONS.get(name)
    label = name if name.isidentifier() else "Exception"
    try:
        exc = (cls or type(label, (Exception,), {}))(message)
    except Exception:  # a builtin class that wants other arguments (UnicodeError's kin)
        exc = type(label, (Exception,), {})(message)
    raise exc


def remote_function(box, name):
    """A stand-in for the student's function ``name`` that runs it in ``box``.

    Parameters
    ----------
    box : Sandbox
        The process holding the answer.
    name : str
        The function's name in the answer.

    Returns
    -------
    RemoteFunction
        Called like the student's function. Raises :class:`autograder.codec.Unsupported`
        (and sets ``box.unsupported``) for an argument that cannot travel,
        :class:`autograder.checks.CheckTimeout` when the call runs past
        ``box.limits["call_s"]``, ``RuntimeError`` when the child died.
    """
    return RemoteFunction(box, name)


class RemoteFunction:
    """The student's function ``name`` of the answer held by ``box``, called from the
    grader's process (see :func:`remote_function`).

    Calling it runs the function in the child. :meth:`measured_call` also returns what
    the call cost where it ran: the memory checks read it through
    :func:`autograder.checks._helpers.metered`, so that they judge the child's
    allocations, not the grader's.
    """

    def __init__(self, box, name):
        from .cleanroom_process import Sandbox

        if not isinstance(box, Sandbox):
            raise ValueError(f"box must be a Sandbox, got {type(box).__name__}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a function's name, got {name!r}")
        self.box = box
        self.name = self.__name__ = name

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs, measure=False)[0]

    def measured_call(self, *args, **kwargs):
        """Call the function; return ``(result, cost)``.

        ``cost`` is a dict: ``"traced"``, the largest memory the call held at once as
        :mod:`tracemalloc` saw it in the child (bytes, the kernel's measure), and
        ``"rss"``, how far the child's resident memory rose above its level before the
        call at its highest, read by the grader from ``/proc`` (bytes; ``None`` where
        the grader may not reset the child's high-water mark)."""
        return self._call(args, kwargs, measure=True)

    def _call(self, args, kwargs, measure):
        from .checks import CheckTimeout

        box = self.box
        try:
            req = {
                "op": "call",
                "name": self.name,
                "args": [codec.encode(a) for a in args],
                "kwargs": {k: codec.encode(v) for k, v in kwargs.items()},
            }
        except codec.Unsupported as exc:
            box.unsupported = str(exc)
            raise
        if measure:
            req["measure"] = True
        before = box.reset_peak_rss() if measure else None
        watch = measure and before is not None
        msg = box.request(req, box.limits["call_s"], watch=watch)
        high = box.peak_rss() if watch else None
        if "dead" in msg:
            if "did not return" in msg["dead"] and "violation" not in msg:
                raise CheckTimeout(float(box.limits["call_s"]))
            raise RuntimeError(msg["dead"])
        if "error" in msg:
            _raise_like(msg["error"])
        try:
            got_args = [codec.decode(g) for g in msg["args"]]
            got_kwargs = {k: codec.decode(g) for k, g in msg["kwargs"].items()}
            result = codec.decode(msg["result"])
            if len(got_args) != len(args) or set(got_kwargs) != set(kwargs):
                raise codec.Malformed("the arguments after the call are not the ones sent")
            for s, g in zip(args, got_args):
                codec.write_back(s, g)
            for k, g in got_kwargs.items():
                codec.write_back(kwargs[k], g)
        except (
            ValueError,
            TypeError,
            KeyError,
            RuntimeError,
            OverflowError,
            MemoryError,
            RecursionError,
        ) as exc:
            box._violate(
                f"a reply whose values cannot be read back ({type(exc).__name__}: {str(exc)[:200]})"
            )
            raise RuntimeError(box.dead) from None
        for text in msg["warnings"]:
            # re-raised here, where call_student records them (as in the kernel)
            warnings.warn(text, RuntimeWarning, stacklevel=3)
        traced = msg["peak_bytes"]
        cost = {
            "traced": traced if traced is not None else 0,
            "rss": None if high is None else max(0, high - before),
        }
        return result, cost
