"""Summarise the recomputation tests' deviations from JUnit XML files (``make test-blas``).

Usage: ``python tests/helpers/deviations.py RUN.xml [RUN.xml ...]``. Each file is one run
(one ``OPENBLAS_CORETYPE``); every property that :func:`helpers.reproduce.assert_within`
recorded holds ``recomputed committed allowed`` under a label ``source/quantity/instance``
(``zoo_table/fewshot10/mae_vit:draw3``). Prints, per ``source/quantity``, the largest ``|recomputed
- committed|`` over all runs, the allowed difference at that point, and the run it came from.
"""

import re
import sys
import xml.etree.ElementTree as ET


def family(label):
    """``zoo_table/fewshot10/mae_vit:draw3`` -> ``zoo_table/fewshot10``."""
    return "/".join(label.split("/")[:2])


def main(paths):
    if not paths:
        raise SystemExit("usage: deviations.py RUN.xml [RUN.xml ...]")
    worst = {}
    for path in paths:
        run = re.sub(r"\.xml$", "", path.rsplit("/", 1)[-1])
        for prop in ET.parse(path).iter("property"):
            try:
                got, committed, allowed = (float(v) for v in prop.get("value", "").split())
            except ValueError:
                continue
            key = family(prop.get("name"))
            dev = abs(got - committed)
            if key not in worst or dev > worst[key][0]:
                worst[key] = (dev, allowed, run, prop.get("name"))
    width = max((len(k) for k in worst), default=10)
    print(f"{'quantity':<{width}}  largest |diff|  allowed there  run          where")
    for key in sorted(worst):
        dev, allowed, run, where = worst[key]
        print(f"{key:<{width}}  {dev:14.5f}  {allowed:13.5f}  {run:<11}  {where}")


if __name__ == "__main__":
    main(sys.argv[1:])
