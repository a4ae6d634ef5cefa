"""serve_system.appsettings: what the FastAPI endpoint and the web page share (environment, body
limit, the ``python -m`` launcher)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from serve_system import appsettings
from serve_system.errors import UsageError
from serve_system.fastapi_app.__main__ import main as fastapi_main
from serve_system.fastapi_app.settings import Settings as FastapiSettings
from serve_system.webapp.__main__ import main as webapp_main
from serve_system.webapp.settings import Settings as WebappSettings


def test_blank_variables_count_as_unset_and_values_are_stripped() -> None:
    env = {"P_A": "  x/ ", "P_B": "   ", "P_N": " 12 "}
    assert appsettings.env_value(env, "P_", "A") == "x/"
    assert appsettings.env_value(env, "P_", "B") is None and appsettings.env_value(env, "P_", "C") is None
    assert appsettings.env_number(env, "P_", "N", int, "an integer") == 12
    assert appsettings.env_number(env, "P_", "B", int, "an integer") is None


def test_a_number_that_does_not_read_names_the_variable() -> None:
    with pytest.raises(UsageError, match=r"^P_N='1.5': not an integer$"):
        appsettings.env_number({"P_N": "1.5"}, "P_", "N", int, "an integer")


@pytest.mark.parametrize("settings", [WebappSettings, FastapiSettings])
def test_the_body_limit_is_the_base64_of_the_image_plus_room_for_json(settings: type[WebappSettings]) -> None:
    assert settings(max_image_bytes=1).max_body_bytes == 4 + 4096
    assert settings(max_image_bytes=3 * 1000).max_body_bytes == 4 * 1000 + 4096
    assert settings(max_image_bytes=3 * 1000 + 1).max_body_bytes == 4 * 1001 + 4096


@pytest.mark.parametrize(("main", "variable", "value", "line"), [
    (webapp_main, "SERVE_WEBAPP_BACKEND", "onnx",
     "webapp: error: SERVE_WEBAPP_BACKEND='onnx': must be one of triton, fastapi\n"),
    (fastapi_main, "SERVE_FASTAPI_RUNTIME", "tensorflow",
     "fastapi_app: error: SERVE_FASTAPI_RUNTIME='tensorflow': must be one of onnx, pytorch\n"),
])
def test_each_app_refuses_bad_settings_in_one_line_before_uvicorn_starts(
    main: Callable[[list[str]], int], variable: str, value: str, line: str,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["--port", "1"]) == 2
    assert capsys.readouterr().err == line


def test_only_the_endpoint_has_workers(capsys: pytest.CaptureFixture[str]) -> None:
    for main, prog, workers in ((fastapi_main, "fastapi_app", True), (webapp_main, "webapp", False)):
        with pytest.raises(SystemExit):
            main(["--help"])
        out = capsys.readouterr().out
        assert out.startswith(f"usage: python -m serve_system.{prog} ") and ("--workers" in out) is workers
    with pytest.raises(SystemExit):
        webapp_main(["--workers", "2"])
    assert "unrecognized arguments: --workers 2" in capsys.readouterr().err
