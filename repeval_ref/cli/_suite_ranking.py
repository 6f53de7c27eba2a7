"""The rankings of ``repeval suite``: every encoder's rank within each task, the mean rank
over tasks and Kendall's tau-b between the tasks' rankings, per protocol.

The paired protocols (k-NN, probe) resample the test images within each task for
intervals (:func:`repeval_ref.rank_agreement.rank_bootstrap`); the low-shot figure, a
mean over support draws, is ranked without an interval.
"""

from __future__ import annotations

import numpy as np

from ._suite_render import PAIRED


def rank_protocols(protocols, tasks, per_task, correct, n_encoders, settings):
    """Per protocol, the ranks, mean rank and tau between tasks of ``n_encoders`` encoders.

    Parameters
    ----------
    protocols, tasks : sequence of str
    per_task : dict
        Per task, its ``results``: one entry per encoder, in the order of ``correct``.
    correct : dict
        ``{protocol: {task: bool array (n_encoders, n_test)}}`` of the paired protocols.
    n_encoders : int
    settings : SuiteSettings
        Its ``rank_boot`` and ``seed`` set the bootstrap.

    Returns
    -------
    dict
        ``{protocol: ranking}``; a ranking holds ``tasks``, ``ranks``, ``mean_rank`` and
        ``tau`` with their intervals (None without one) and how they were obtained, or is
        None for a low-shot column with no task where every encoder has a figure.
    """
    from ..rank_agreement import mean_rank, rank_bootstrap, task_ranks, tau_b_matrix

    args = settings
    ranking = {}
    for p in protocols:
        if p in PAIRED:
            rb = rank_bootstrap(
                [correct[p][t] for t in tasks], n_boot=args.rank_boot, seed=args.seed
            )
            ranking[p] = {
                "tasks": list(tasks),
                "ranks": rb["ranks"],
                "mean_rank": rb["mean_rank"],
                "mean_rank_interval": rb["mean_rank_interval"],
                "tau": rb["tau"],
                "tau_interval": rb["tau_interval"],
                "tau_defined_replicates": rb["tau_defined"],
                "n_boot": rb["n_boot"],
                "interval": "bootstrap",
            }
        else:
            used = [
                t
                for t in tasks
                if all(r["fewshot"]["mean"] is not None for r in per_task[t]["results"])
            ]
            if not used:
                ranking[p] = None
                continue
            scores = np.array(
                [
                    [per_task[t]["results"][i]["fewshot"]["mean"] for t in used]
                    for i in range(n_encoders)
                ]
            )
            ranking[p] = {
                "tasks": used,
                "ranks": task_ranks(scores),
                "mean_rank": mean_rank(scores),
                "mean_rank_interval": None,
                "tau": tau_b_matrix(scores),
                "tau_interval": None,
                "tau_defined_replicates": None,
                "n_boot": None,
                "interval": "none: the low-shot figure is a mean over support draws, with no "
                "right/wrong answer per test image to resample",
            }
    return ranking
