"""Both Triton images install what the models import, from one list (model_repository/requirements.txt).

The GPU image (roles/serve_stack/files/triton_gpu/Dockerfile) is built on the Chameleon node from
NVIDIA's registry, which nothing here can reach; what can be checked without it is checked here: the
models' imports against the list, both recipes installing the list, the role putting it beside the
Dockerfile, and the versions that the lab's Pascal GPUs (compute capability 6.0) need."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from serve_system.images import build

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "model_repository" / "requirements.txt"
GPU_DOCKERFILE = ROOT / "roles" / "serve_stack" / "files" / "triton_gpu" / "Dockerfile"
REHEARSAL = ROOT / "src" / "serve_system" / "images" / "triton" / "Containerfile"
#: every Python file Triton's Python backend runs as a model
MODEL_FILES = sorted((ROOT / "model_repository").glob("*/1/model.py")) + [
    ROOT / "src" / "serve_system" / "shims" / "onnx_python_shim.py"]
#: provided by Triton's Python backend itself
BACKEND_MODULES = {"triton_python_backend_utils"}


def requirements() -> list[Requirement]:
    lines = [ln.split("#", 1)[0].strip() for ln in REQUIREMENTS.read_text().splitlines()]
    return [Requirement(ln) for ln in lines if ln]


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside a ``try`` whose handlers catch ImportError (an optional import with a fallback)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try):
            for h in node.handlers:
                names = [h.type] if not isinstance(h.type, ast.Tuple) else list(h.type.elts)
                caught = {n.id for n in names if isinstance(n, ast.Name)}
                if caught & {"ImportError", "ModuleNotFoundError"}:
                    return True
    return False


def required_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if not _guarded(node, parents):
            found |= {n.split(".")[0] for n in names}
    return found - set(sys.stdlib_module_names) - BACKEND_MODULES


def test_every_module_a_model_imports_is_in_the_list() -> None:
    listed = {canonicalize_name(r.name) for r in requirements()}
    dists = importlib.metadata.packages_distributions()
    assert MODEL_FILES and all(p.is_file() for p in MODEL_FILES)
    seen = set()
    for path in MODEL_FILES:
        for module in required_imports(path):
            # the distribution that provides the module (PIL -> pillow), as this environment installed it
            provided = {canonicalize_name(d) for d in dists.get(module, [])}
            assert provided, f"{path}: imports {module}, which no installed distribution provides"
            assert provided & listed, (f"{path}: imports {module} ({', '.join(sorted(provided))}), missing "
                                       f"from {REQUIREMENTS.relative_to(ROOT)}")
            seen.add(module)
    assert {"numpy", "PIL", "onnxruntime"} <= seen


def test_guarded_imports_are_optional() -> None:
    """torch (the lab's food11.pth) is optional: its import falls back to onnxruntime when missing."""
    food = ROOT / "model_repository" / "food_classifier" / "1" / "model.py"
    assert "torch" not in required_imports(food)
    assert "torch" in food.read_text()


def test_the_list_is_pinned_for_tritons_python() -> None:
    reqs = {canonicalize_name(r.name): r for r in requirements()}
    for name, r in reqs.items():
        assert any(s.operator in ("==", "<", "<=", "~=") for s in r.specifier), f"{name}: no upper bound"
    # Triton 24.10's Python backend and the rehearsal's pytriton wheel are built against numpy 1.x
    assert not reqs["numpy"].specifier.contains("2.0.0") and reqs["numpy"].specifier.contains("1.26.4")


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _installs_copied_list(path: Path, context_name: str) -> None:
    steps = _instructions(path)
    copies = [rest.split() for word, rest in steps if word == "COPY"]
    dest = next((c[1] for c in copies if c[0] == context_name), None)
    assert dest, f"{path}: does not COPY {context_name}"
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert re.search(rf"pip install [^;&]*-r {re.escape(dest)}", runs), f"{path}: no pip install -r {dest}"


def test_gpu_image_installs_the_list_and_the_role_puts_it_beside_the_dockerfile() -> None:
    _installs_copied_list(GPU_DOCKERFILE, "requirements.txt")
    tasks = yaml.safe_load((ROOT / "roles" / "serve_stack" / "tasks" / "triton_image.yml").read_text())
    build_task = next(t for t in tasks if t.get("ansible.builtin.include_tasks") == "build_image.yml")
    triton = build_task["vars"]["__serve_stack_build"]
    assert triton["name"] == "triton"
    assert triton["files"] == {"requirements.txt": "{{ serve_stack_triton_requirements }}",
                               "pincheck.py": "{{ __serve_stack_pincheck }}"}
    assert triton["args"] == {"TORCH_SOURCE": "{{ serve_stack_triton_torch_source }}"}
    defaults = yaml.safe_load((ROOT / "roles" / "serve_stack" / "defaults" / "main.yml").read_text())
    assert defaults["serve_stack_triton_requirements"] == "{{ serve_stack_model_source }}/requirements.txt"
    assert defaults["serve_stack_model_source"] == "{{ playbook_dir }}/../model_repository"


def test_rehearsal_image_installs_the_same_list() -> None:
    _installs_copied_list(REHEARSAL, "models-requirements.txt")
    assert build.TRITON.files == {"models-requirements.txt": REQUIREMENTS}
    # a change to the list is a new rehearsal image
    assert build.MODEL_REQUIREMENTS == REQUIREMENTS


def test_gpu_image_versions_for_pascal() -> None:
    steps = _instructions(GPU_DOCKERFILE)
    assert steps[0] == ("FROM", "nvcr.io/nvidia/tritonserver:24.10-py3")
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    # PyTorch's CUDA 12.8+ builds dropped Pascal (sm_60): a CUDA <= 12.6 build from either source, each
    # wheel by URL and sha256, for Triton 24.10's CPython 3.10
    assert re.search(r'-r "/opt/serve-system/torch-\$\{TORCH_SOURCE\}\.txt"', runs), runs
    for source in ("pytorch-index", "pypi"):
        lines = [ln for ln in (GPU_DOCKERFILE.parent / f"torch-{source}.txt").read_text().splitlines()
                 if ln and not ln.startswith("#")]
        assert [ln.split(" @ ")[0] for ln in lines] == ["torch", "torchvision"], source
        for line in lines:
            assert re.search(r"-cp310-cp310-[a-z0-9_]*linux[a-z0-9_]*x86_64\.whl#sha256=[0-9a-f]{64}$",
                             line), line
        index = re.search(r"download\.pytorch\.org/whl/cu(\d+)/", lines[0])
        if source == "pytorch-index":
            assert index and int(index.group(1)) <= 126, lines[0]
        else:
            assert "files.pythonhosted.org" in lines[0]
    assert 'torch.version.cuda == "12.4"' in runs
    # the build fails on the node, not at the first request, when a model's module is missing
    check = re.search(r"python3 -c '([^']*)'", runs)
    assert check, runs
    stmts = [s.strip() for s in check.group(1).split(";")]
    imported = {n.strip().split(".")[0] for st in stmts if st.startswith("import ")
                for n in st[len("import "):].split(",")}
    needed = set().union(*(required_imports(p) for p in MODEL_FILES))
    assert needed <= imported, f"the build's import check misses {needed - imported}"


def test_recipe_digest_changes_with_the_list(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "serve_stack_images", ROOT / "roles" / "serve_stack" / "filter_plugins" / "serve_stack_images.py")
    assert spec and spec.loader
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    digest = plugin.serve_stack_recipe_digest
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM x\n")
    req = tmp_path / "requirements.txt"
    req.write_text("numpy<2\n")
    first = digest([str(ctx), str(req)])
    assert first == digest([str(ctx), str(req)]) and len(first) == 12
    req.write_text("numpy<2\nonnxruntime==1.20.1\n")
    second = digest([str(ctx), str(req)])
    (ctx / "Dockerfile").write_text("FROM y\n")
    assert len({first, second, digest([str(ctx), str(req)])}) == 3
    # a missing path is no traceback in the role's defaults: the build's copy task names it
    assert digest([str(ctx), str(tmp_path / "nowhere.txt")]) != digest([str(ctx)])
