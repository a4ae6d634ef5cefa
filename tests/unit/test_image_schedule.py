"""The concurrent image build: its plan (which step needs which), its runner, its cache writes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from serve_system.errors import ServeSystemError
from serve_system.images import build as images
from serve_system.images import fastapi, schedule, stack
from serve_system.images.schedule import Step


def _noop() -> None:
    return None


def test_levels_follow_the_needs_and_refuse_bad_plans() -> None:
    steps = [Step("c", "c", ("a", "b"), _noop), Step("a", "a", (), _noop), Step("b", "b", ("a",), _noop)]
    assert schedule.levels(steps) == [["a"], ["b"], ["c"]]
    with pytest.raises(ServeSystemError, match="a cycle among a, b"):
        schedule.levels([Step("a", "a", ("b",), _noop), Step("b", "b", ("a",), _noop)])
    with pytest.raises(ServeSystemError, match="a needs z, which is no step"):
        schedule.levels([Step("a", "a", ("z",), _noop)])
    with pytest.raises(ServeSystemError, match="two steps named a"):
        schedule.levels([Step("a", "a", (), _noop), Step("a", "a", (), _noop)])


def test_run_starts_independent_steps_together_and_each_after_its_needs() -> None:
    both_running = threading.Barrier(2, timeout=10)
    log: list[str] = []
    lock = threading.Lock()

    def step(name: str, meet: bool = False) -> str:
        with lock:
            log.append(f"start {name}")
        if meet:  # returns only if the other independent step runs at the same time
            both_running.wait()
        with lock:
            log.append(f"end {name}")
        return name.upper()

    done: list[str] = []
    steps = [
        Step("x", "x", (), lambda: step("x", meet=True)),
        Step("y", "y", (), lambda: step("y", meet=True)),
        Step("z", "z", ("x", "y"), lambda: step("z")),
    ]
    results = schedule.run(steps, workers=2, on_done=done.append)
    assert results == {"x": "X", "y": "Y", "z": "Z"}
    assert log.index("start z") > max(log.index("end x"), log.index("end y"))
    assert sorted(done[:2]) == ["x", "y"] and done[2] == "z"


def test_a_failure_names_its_step_in_one_line_and_stops_later_steps() -> None:
    started: list[str] = []
    slow_finished = threading.Event()

    def fail() -> None:
        started.append("bad")
        raise ServeSystemError("podman build failed (exit 1); full log: /x.log; last lines: a | b")

    def slow() -> str:
        started.append("slow")
        time.sleep(0.3)
        slow_finished.set()
        return "ok"

    steps = [
        Step("image:bad", "the triton image", (), fail),
        Step("image:slow", "the client image", (), slow),
        Step("after", "after", ("image:bad",), lambda: started.append("after")),
        Step("later", "later", ("image:slow",), lambda: started.append("later")),
    ]
    with pytest.raises(ServeSystemError) as err:
        schedule.run(steps, workers=2)
    message = str(err.value)
    assert message.startswith("the triton image failed: podman build failed (exit 1)")
    assert "\n" not in message
    assert slow_finished.is_set()  # a step already running is waited for, not abandoned
    assert "after" not in started and "later" not in started


def test_an_unexpected_error_is_named_too() -> None:
    def boom() -> None:
        raise OSError("No space left on device\nmore")

    with pytest.raises(ServeSystemError, match=r"^the node image failed: No space left on device$"):
        schedule.run([Step("image:node", "the node image", (), boom)])


def test_plan_of_every_image() -> None:
    steps = stack.plan()
    by_key = {s.key: s for s in steps}
    slim, bookworm, node_base = (stack.base_step(b) for b in
                                 (images.TRIXIE_SLIM, images.BOOKWORM_SLIM, images.TRIXIE_NODE))
    assert set(by_key) == {slim, bookworm, node_base, "image:node", "image:triton", "image:client",
                           "image:fastapi"}
    assert by_key["image:triton"].needs == (bookworm,)
    assert by_key["image:client"].needs == (slim,)
    assert by_key["image:fastapi"].needs == (slim,)
    assert by_key["image:node"].needs == (node_base,)
    # the two Debian 13 bases one after the other (the second reuses the first's .debs), Debian 12 beside
    assert by_key[node_base].needs == (slim,)
    assert by_key[slim].needs == () and by_key[bookworm].needs == ()
    assert schedule.levels(steps) == [
        sorted([bookworm, slim]),
        sorted(["image:client", "image:fastapi", "image:triton", node_base]),
        ["image:node"],
    ]
    # where few slots are free, the longest chains start first
    assert [s.key for s in steps if s.key.startswith("image:")] == [
        "image:triton", "image:client", "image:fastapi", "image:node"]


def test_plan_of_some_images_has_only_their_bases() -> None:
    steps = stack.plan(("triton", "node"))
    assert [s.key for s in steps] == [stack.base_step(images.BOOKWORM_SLIM),
                                      stack.base_step(images.TRIXIE_NODE), "image:triton", "image:node"]
    assert all(s.needs == () for s in steps[:2])  # no Debian 13 slim base to wait for
    with pytest.raises(ValueError, match="no rehearsal image named gpu"):
        stack.plan(("gpu",))


def test_planned_refs_are_the_recipes_refs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_SYSTEM_CACHE", str(tmp_path))
    refs = stack.stack_refs()
    for key in ("triton", "client"):
        assert refs[key] == images.StackImage(key, images.STACK_IMAGES[key].ref,
                                              images.archive_path(images.STACK_IMAGES[key]))
    tag = fastapi.recipe_tag(fastapi.rehearsal_build_args(images.TRIXIE_SLIM.ref))
    assert refs["fastapi"].ref == f"localhost/serve-system-fastapi:{tag}"
    assert refs["fastapi"].archive == tmp_path / "images" / f"serve-system-fastapi-{tag}.tar"


def test_a_base_whose_images_are_all_built_is_not_made(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_SYSTEM_CACHE", str(tmp_path))
    refs = stack.stack_refs()
    for key in ("client", "fastapi", "triton"):
        refs[key].archive.parent.mkdir(parents=True, exist_ok=True)
        refs[key].archive.write_bytes(b"archive")
    # every stack archive is there: the steps finish without debootstrap, podman or root
    results = stack.ensure_images(("triton", "client", "fastapi"))
    assert stack.stack_of(results) == refs
    assert results[stack.base_step(images.TRIXIE_SLIM)] == images.TRIXIE_SLIM.ref
    assert not (tmp_path / "locks").exists()


def test_written_as_leaves_the_file_complete_or_absent(tmp_path: Path) -> None:
    target = tmp_path / "images" / "x.tar"
    with pytest.raises(RuntimeError), images.written_as(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("save failed")
    assert not target.exists() and list(target.parent.iterdir()) == []
    with images.written_as(target) as tmp:
        assert not target.exists()
        tmp.write_bytes(b"whole")
    assert target.read_bytes() == b"whole" and list(target.parent.iterdir()) == [target]


def test_deb_cache_is_per_suite_with_a_partial_folder(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_SYSTEM_CACHE", str(tmp_path))
    assert images.deb_cache("trixie") == tmp_path / "debs" / "trixie"
    assert (tmp_path / "debs" / "trixie" / "partial").is_dir()
    assert images.deb_cache("bookworm") != images.deb_cache("trixie")
