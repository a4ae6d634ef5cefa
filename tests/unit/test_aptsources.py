"""serve_system.aptsources: which apt source files define a repository the play adds already."""

from __future__ import annotations

import base64
from typing import Any

from serve_system.aptsources import guard, hosts, normalize_uri, slurped

NVIDIA = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"
DOCKER = "https://download.docker.com/linux/ubuntu"
OWN_NVIDIA = "/etc/apt/sources.list.d/nvidia-container-toolkit.sources"
OWN_DOCKER = "/etc/apt/sources.list.d/docker.sources"

#: what the lab's notebook (NVIDIA's install guide) writes
NOTEBOOK_LIST = (
    "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
    "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
    "#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
    "https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH) /\n"
)

OWNED = [OWN_DOCKER, OWN_NVIDIA]


def same_repository(files: list[dict[str, str]], uri: str, arch: str, own: str) -> dict[str, list[Any]]:
    """guard() for one repository about to be added, in the shape the assertions below read."""
    got = guard(files, [uri], [own], arch)
    return {"whole": [w["path"] for w in got["whole"]], "mixed": got["mixed"]}


def test_the_notebooks_list_file_with_arch_variable_is_the_same_repository() -> None:
    files = [{"path": "/etc/apt/sources.list.d/nvidia-container-toolkit.list", "text": NOTEBOOK_LIST}]
    assert same_repository(files, NVIDIA, "amd64", OWN_NVIDIA) == {
        "whole": ["/etc/apt/sources.list.d/nvidia-container-toolkit.list"], "mixed": []}
    # on arm64 $(ARCH) names another repository
    assert same_repository(files, NVIDIA, "arm64", OWN_NVIDIA) == {"whole": [], "mixed": []}


def test_dockers_guide_list_and_trailing_slash_and_case() -> None:
    text = ("deb [arch=amd64 signed-by=/etc/apt/keyrings/docker.asc] "
            "HTTPS://Download.Docker.com/linux/ubuntu/ noble stable\n")
    files = [{"path": "/etc/apt/sources.list.d/docker.list", "text": text}]
    got = same_repository(files, DOCKER, "amd64", OWN_DOCKER)
    assert got == {"whole": ["/etc/apt/sources.list.d/docker.list"], "mixed": []}


def test_own_file_is_not_reported() -> None:
    own = (f"Types: deb\nURIs: {DOCKER}\nSuites: noble\nComponents: stable\n"
           "Signed-By: /etc/apt/keyrings/docker.asc\n")
    assert same_repository([{"path": OWN_DOCKER, "text": own}], DOCKER, "amd64", OWN_DOCKER) == {
        "whole": [], "mixed": []}


def test_a_file_with_other_repositories_is_mixed_with_its_line_numbers() -> None:
    text = ("# Ubuntu\n"
            "deb http://archive.ubuntu.com/ubuntu noble main\n"
            f"deb [signed-by=/usr/share/keyrings/docker-archive-keyring.gpg] {DOCKER} noble stable\n"
            f"deb-src {DOCKER} noble stable  # sources too\n")
    got = same_repository([{"path": "/etc/apt/sources.list", "text": text}], DOCKER, "amd64", OWN_DOCKER)
    assert got == {"whole": [], "mixed": [{"path": "/etc/apt/sources.list", "lines": [3, 4]}]}


def test_deb822_paragraphs_disabled_and_multiline_keys() -> None:
    key_block = ("Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBF\n"
                 " -----END PGP PUBLIC KEY BLOCK-----\n")
    only_docker = f"Types: deb\nURIs: {DOCKER}\nSuites: noble\nComponents: stable\n{key_block}"
    disabled = f"Types: deb\nURIs: {DOCKER}\nSuites: noble\nEnabled: no\n"
    mixed = (f"Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble\n\n"
             f"# docker\nTypes: deb\nURIs: http://mirror.example/x {DOCKER}/\nSuites: noble\n")
    files = [
        {"path": "/etc/apt/sources.list.d/old-docker.sources", "text": only_docker},
        {"path": "/etc/apt/sources.list.d/off.sources", "text": disabled},
        {"path": "/etc/apt/sources.list.d/ubuntu.sources", "text": mixed},
    ]
    assert same_repository(files, DOCKER, "amd64", OWN_DOCKER) == {
        "whole": ["/etc/apt/sources.list.d/old-docker.sources"],
        "mixed": [{"path": "/etc/apt/sources.list.d/ubuntu.sources", "lines": [7]}],
    }


def test_other_repositories_on_the_same_host_are_not_the_same() -> None:
    text = "deb [signed-by=/x.gpg] https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH) /\n"
    files = [{"path": "/etc/apt/sources.list.d/exp.list", "text": text}]
    assert same_repository(files, NVIDIA, "amd64", OWN_NVIDIA) == {"whole": [], "mixed": []}


def test_normalize_uri() -> None:
    assert normalize_uri("HTTPS://Nvidia.GitHub.io/libnvidia-container/stable/deb/$(ARCH)/",
                         "amd64") == NVIDIA
    # the path's case is kept
    assert normalize_uri("https://download.docker.com/linux/Ubuntu", "amd64").endswith("/Ubuntu")


def test_slurped_decodes_and_skips_unreadable_results() -> None:
    good = {"source": "/etc/apt/sources.list.d/a.list",
            "content": base64.b64encode(b"deb http://x/ y z\n\xff").decode()}
    gone = {"item": "/etc/apt/sources.list.d/b.list", "failed": True, "msg": "file not found"}
    bad = {"source": "/etc/apt/sources.list.d/c.list", "content": "not base64!"}
    assert slurped([good, gone, bad]) == [
        {"path": "/etc/apt/sources.list.d/a.list", "text": "deb http://x/ y z\n\ufffd"}]


NOTEBOOK_WITH_EXPERIMENTAL = NOTEBOOK_LIST.replace("#deb", "deb")
OWN_NVIDIA_TEXT = (f"Types: deb\nURIs: {NVIDIA}\nSuites: /\n"
                   "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc\n")


def test_a_notebook_list_added_after_a_first_run_is_found_by_any_role() -> None:
    """The reverse order: the play's NVIDIA file is on the node, the notebook's list came later; the
    docker role guards (about to add only Docker's repository) and still finds it."""
    files = [{"path": OWN_NVIDIA, "text": OWN_NVIDIA_TEXT},
             {"path": "/etc/apt/sources.list.d/nvidia-container-toolkit.list", "text": NOTEBOOK_LIST}]
    got = guard(files, [DOCKER], OWNED, "amd64")
    assert got["wanted"] == sorted([DOCKER, NVIDIA])
    assert got["whole"] == [{"path": "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
                             "uris": [NVIDIA], "also": []}]
    assert got["mixed"] == []
    # without the play's file on the node, nothing of NVIDIA's is guarded yet
    assert guard(files[1:], [DOCKER], OWNED, "amd64")["whole"] == []


def test_the_notebooks_experimental_channel_goes_with_its_file_and_is_named() -> None:
    files = [{"path": "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
              "text": NOTEBOOK_WITH_EXPERIMENTAL}]
    got = guard(files, [NVIDIA], OWNED, "amd64")
    assert got["mixed"] == []
    assert got["whole"] == [{"path": "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
                             "uris": [NVIDIA],
                             "also": ["https://nvidia.github.io/libnvidia-container/experimental/deb/amd64"]}]


def test_another_upstream_in_the_same_file_still_stops() -> None:
    text = NOTEBOOK_LIST + "deb https://nvidia.github.io/other-project/stable/deb/amd64 /\n"
    got = guard([{"path": "/etc/apt/sources.list.d/x.list", "text": text}], [NVIDIA], OWNED, "amd64")
    assert got["whole"] == [] and got["mixed"] == [{"path": "/etc/apt/sources.list.d/x.list", "lines": [1]}]


def test_hosts_of_the_guarded_repositories() -> None:
    assert hosts([DOCKER, NVIDIA, DOCKER + "/x", "not a url"]) == ["download.docker.com", "nvidia.github.io"]
