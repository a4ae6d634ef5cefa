"""Triton's rules for an ensemble: its scheduling, its steps, and the data flow between them (every
tensor written once, every step reachable, every output written, every input used)."""

from __future__ import annotations

import difflib

from .backends import ENSEMBLE
from .pbtxt import ModelConfig, Problem


def ensemble_rules(cfg: ModelConfig, name: str, p: list[Problem]) -> None:
    if cfg.platform != ENSEMBLE:
        p.append(Problem("platform", f"ensemble scheduling cannot be set for a model whose platform is not "
                         f"ensemble (got {cfg.platform!r}): set platform: \"ensemble\""))
        return
    if not cfg.HasField("ensemble_scheduling"):
        p.append(Problem("ensemble_scheduling", "ensemble scheduling must be set for a model whose platform "
                                                "is "
                         "ensemble: add ensemble_scheduling { step [ ... ] }"))
        return
    for attr, what in (("instance_group", "instance group"), ("model_warmup", "model_warmup")):
        if len(getattr(cfg, attr)):
            p.append(Problem(attr, f"{what} should not be specified for an ensemble (its steps' models have "
                                   "their "
                             "own): remove it"))
    if cfg.HasField("optimization"):
        p.append(Problem("optimization", "optimization should not be specified for an ensemble: remove it"))
    steps = cfg.ensemble_scheduling.step
    if not steps:
        p.append(Problem("ensemble_scheduling.step", "must specify 'step' for an ensemble"))
        return
    writer = _steps(cfg, p)
    if writer is not None:
        _flow(cfg, writer, p)


def _steps(cfg: ModelConfig, p: list[Problem]) -> dict[str, int] | None:
    """Each step's own rules; the step that writes each tensor (a tensor is written by at most one
    step), or None where the data flow cannot be followed."""
    steps = cfg.ensemble_scheduling.step
    writer: dict[str, int] = {}
    ok = True
    for i, step in enumerate(steps):
        field = f"ensemble_scheduling.step[{i}]"
        if not step.model_name:
            p.append(Problem(f"{field}.model_name", f"must specify 'model_name' in step {i}"))
        elif step.model_name == cfg.name:
            p.append(Problem(f"{field}.model_name", f"step {i} calls the ensemble itself ({cfg.name!r}): "
                                                    "circular "
                             "dependency"))
        if step.model_version < -1:
            p.append(Problem(f"{field}.model_version", "must be -1 (latest) or a version number, got "
                                                       f"{step.model_version}"))
        if not step.input_map:
            p.append(Problem(f"{field}.input_map", f"must specify 'input_map' in step {i}"))
            ok = False
        if not step.output_map:
            p.append(Problem(f"{field}.output_map", f"must specify 'output_map' in step {i}"))
            ok = False
        for tensor in sorted(step.output_map.values()):
            if tensor in writer:
                p.append(Problem(f"{field}.output_map", f"ensemble tensor {tensor!r} can appear in an output "
                                                        "map only "
                                 f"once (already written by step {writer[tensor]})"))
                ok = False
            writer.setdefault(tensor, i)
    return writer if ok else None


def _flow(cfg: ModelConfig, writer: dict[str, int], p: list[Problem]) -> None:
    """The data flow: a step runs once all its inputs are ready; every output is written, every input
    and every written tensor is read."""
    steps = cfg.ensemble_scheduling.step
    ready = {inp.name for inp in cfg.input}
    consumed = {t for step in steps for t in step.input_map.values()}
    unused_inputs = [inp.name for inp in cfg.input if inp.name not in consumed]
    pending = list(range(len(steps)))
    progress = True
    while progress:
        progress = False
        for i in list(pending):
            if set(steps[i].input_map.values()) <= ready:
                ready |= set(steps[i].output_map.values())
                pending.remove(i)
                progress = True
    # a misspelt tensor name is both unreachable (read, never written) and unused (written, never
    # read): say it once, as a "did you mean"
    outputs = {o.name for o in cfg.output}
    unused = sorted(t for t in writer if t not in outputs and t not in consumed) + unused_inputs
    available = sorted(ready | set(writer))
    suggested: set[str] = set()
    rooted = False
    for i in pending:
        lack = sorted(t for t in steps[i].input_map.values() if t not in ready and t not in writer)
        for t in lack:
            rooted = True
            near = difflib.get_close_matches(t, unused, 1, 0.4) or difflib.get_close_matches(t, available, 1)
            suggested.update(near)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            p.append(Problem(f"ensemble_scheduling.step[{i}].input_map",
                             f"ensemble tensor {t!r} is read but neither an ensemble input nor written by a "
                             f"step: it is unreachable{hint}"))
    for i, out in enumerate(cfg.output):
        if out.name not in writer:
            near = difflib.get_close_matches(out.name, unused, 1, 0.4)
            suggested.update(near)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            p.append(Problem(f"output[{i}]", f"ensemble output {out.name!r} is not written by any step's "
                             f"output_map{hint}"))
        elif out.name not in ready and not rooted:
            p.append(Problem(f"output[{i}]", f"output {out.name!r} for ensemble is not written: its steps "
                                             "wait on "
                             "each other (a cycle in the steps' input and output maps)"))
    for i, inp in enumerate(cfg.input):
        if inp.name in unused_inputs and inp.name not in suggested:
            p.append(Problem(f"input[{i}]",
                             f"ensemble input {inp.name!r} is not used by any step's input_map"))
    for tensor in unused:
        if tensor not in suggested and tensor not in unused_inputs:
            p.append(Problem(f"ensemble_scheduling.step[{writer[tensor]}].output_map",
                             f"ensemble tensor {tensor!r} is unused in the ensemble: no step reads it and it "
                             "is not an ensemble output"))

