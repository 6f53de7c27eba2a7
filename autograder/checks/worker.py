"""Child process of :func:`autograder.checks.run_check_isolated`.

Reads ``{"name", "source", "func_name", "seed"}`` as JSON on stdin, executes the
student's source in a fresh namespace, runs the check and prints one line
``AUTOGRADER-FINDINGS:<json list of findings>`` with plain numbers and strings.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def run_student_source(source, namespace):
    """Run the student's source text ``source`` in the dict ``namespace``, its code named
    ``<student code>`` (the one place this worker compiles the student's code)."""
    if not isinstance(source, str) or not isinstance(namespace, dict):
        raise ValueError("source must be text and namespace a dict")
    code = compile(source, "<student code>", "exec")
    exec(code, namespace)


def main():
    request = json.loads(sys.stdin.read())
    from autograder.checks import Finding, check_points, run_check

    name = request["name"]
    namespace = {"__name__": "student_submission"}
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            run_student_source(request["source"], namespace)
        fn = namespace.get(request["func_name"])
        findings = run_check(name, fn, int(request["seed"]))
    except NotImplementedError:
        findings = [
            Finding(
                name,
                0.0,
                check_points(name),
                False,
                "your code raised NotImplementedError: write the function",
            )
        ]
    except SyntaxError as exc:
        findings = [
            Finding(
                name,
                0.0,
                check_points(name),
                False,
                f"your code has a syntax error on line {exc.lineno}: {exc.msg}",
            )
        ]
    except Exception as exc:  # the student's top-level code failed
        findings = [
            Finding(
                name,
                0.0,
                check_points(name),
                False,
                f"running your code raised {type(exc).__name__}: {exc}",
            )
        ]
    sys.stdout.write("AUTOGRADER-FINDINGS:" + json.dumps([f.to_dict() for f in findings]) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
