"""A search's decisions (stage 4): on what is measured, the next batch of a halving or optuna search, or
its end with a winner or a tie. What each strategy measures, its rungs and
its budget are planned in stage 3 (:mod:`serve_system.experiment.search`).

**Checkpoints**: every measured level is a record of the run folder, and a search's state is a pure
function of those records: :func:`step` replays the search from the start on what is measured (the
halving rungs; optuna's study rebuilt batch by batch, its sampler seeded, trials added in the same
order), so a re-run with the same run id goes on where it stopped and measures nothing twice. The
role asks ``serve-system decide`` (:mod:`serve_system.results.adaptive`) for each next batch.

The strategies: :mod:`.searchhalving` and :mod:`.searchoptuna`; the rule they share:
:mod:`.searchrule`; their report lines: :mod:`.searchreport`.
"""

from __future__ import annotations

from ..experiment.search import HALVING, OPTUNA
from ..node.plans import SearchPlan
from . import searchhalving as halving
from . import searchoptuna as optuna_search
from .row import Row
from .searchrule import Outcome


def step(rec: SearchPlan, rows: list[Row], split: bool = True) -> Outcome:
    """The search's next batch on what is measured (``rows``: the host's summary rows), or its end.
    ``split`` false: halving drops by the rule before issue 40 (:data:`.searchrule.FAMILY_LEVEL` over the
    planned rungs, per candidate; ``bench/sequential.py``'s reference column)."""
    if rec.strategy == HALVING:
        return halving.decide(rec, rows, split)
    if rec.strategy == OPTUNA:
        return optuna_search.decide(rec, rows)
    raise ValueError(f"search strategy {rec.strategy!r}: use grid, halving or optuna")
