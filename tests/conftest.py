"""Shared fixtures."""
import pytest


@pytest.fixture
def one_torch_thread():
    """Small tensors: one intra-op thread avoids spinning against other jobs on 2 cores."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def pytest_collection_modifyitems(config, items):
    """Keep the tests that share a module- or class-scoped fixture on one xdist worker.

    ``make test`` runs the suite with ``pytest -n 2 --dist loadgroup``: tests are dealt out
    one at a time, except those in an ``xdist_group``, which all go to the same worker. A
    test that uses an expensive shared fixture (a graded class, a built set of
    notebooks, a browser) is put in the group of its module, so that the fixture is made
    once, as in a serial run; every other test goes wherever a worker is free.
    """
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        shared = any(d.scope in ("module", "class", "package")
                     for defs in info.name2fixturedefs.values() for d in defs[-1:])
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
