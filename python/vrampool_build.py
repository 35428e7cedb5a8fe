"""The PEP 517 build backend of vrampool (pyproject.toml names it; pip runs
it with python/ on sys.path). Standard library only, so that `pip wheel .`
needs nothing from the network.

build_wheel runs the project's own make for the library, the command and
its man page in a build folder of its own (build/wheel/obj, SANITIZE
cleared: a wheel never carries a sanitized command, whatever build/ holds)
and zips them with the Python package python/vrampool/ into

  vrampool/__init__.py, __main__.py, _version.py (VERSION, written here)
  vrampool/bin/vrampool
  vrampool/lib/vrampool/libvrampool.so
  vrampool/share/man/man1/vrampool.1
  vrampool-V.dist-info/  METADATA, WHEEL, entry_points.txt, RECORD

tagged py3-none-<platform> (the package is pure Python, the binaries load
no Python: one wheel serves every Python 3). The command finds the library
at ../lib/vrampool/ from its own real path, as after `make install`.
auditwheel (`make wheel`) then vendors the command's libraries and retags
it manylinux. build_sdist packs the files git tracks (every file but
build/ and .git/ where there is no git) with PKG-INFO: a wheel builds from
it with the same make, on any platform the project builds on.

The version is the VERSION file's, as the Makefile reads it. Settings:
MAKE (default make), VRAMPOOL_WHEEL_JOBS (make -j, default the CPU count),
SOURCE_DATE_EPOCH (the files' time in the archives, default 1980-01-01).
"""
import base64
import csv
import hashlib
import io
import json
import os
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile

NAME = "vrampool"
OBJ = "build/wheel/obj"
# (path in the built tree, path in the wheel, mode)
BUILT = [
    (OBJ + "/vrampool", "vrampool/bin/vrampool", 0o755),
    (OBJ + "/libvrampool.so", "vrampool/lib/vrampool/libvrampool.so", 0o755),
    (OBJ + "/vrampool.1", "vrampool/share/man/man1/vrampool.1", 0o644),
]


def _root():
    """The source tree: PEP 517 runs a backend with its working directory there."""
    return os.getcwd()


def _version():
    with open(os.path.join(_root(), "VERSION"), encoding="ascii") as f:
        return f.read().strip()


def _pyproject():
    """The [project] table of pyproject.toml (tomllib, or a reader for the
    simple form that file keeps on a Python older than 3.11)."""
    path = os.path.join(_root(), "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    tables, table, pending = {}, None, ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not pending and (not line or line.startswith("#")):
                continue
            if not pending and line.startswith("["):
                table = tables.setdefault(line.strip("[]"), {})
                continue
            pending += line + "\n"
            key, _, value = pending.partition("=")
            if value.count("[") > value.count("]"):
                continue                # an array that goes on
            value = value.strip().replace(",\n]", "]").replace(",]", "]")
            table[key.strip()] = json.loads(value.replace("\n", ""))
            pending = ""
    project = tables["project"]
    project["scripts"] = tables.get("project.scripts", {})
    return project


def _platform_tag():
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _mtime():
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)


def _metadata(version):
    """METADATA (core metadata 2.1) from pyproject.toml's [project] table."""
    p = _pyproject()
    lines = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + version,
             "Summary: " + p["description"], "Requires-Python: " + p["requires-python"]]
    lines += ["Classifier: " + c for c in p.get("classifiers", [])]
    text = "\n".join(lines) + "\n"
    readme = p.get("readme")
    if readme:
        with open(os.path.join(_root(), readme), encoding="utf-8") as f:
            text += "Description-Content-Type: text/markdown\n\n" + f.read()
    return text


def _make():
    """Builds BUILT with the project's Makefile; its output goes to stderr."""
    jobs = os.environ.get("VRAMPOOL_WHEEL_JOBS") or str(os.cpu_count() or 1)
    cmd = shlex.split(os.environ.get("MAKE", "make")) + [
        "-j" + jobs, "B=" + OBJ, "SANITIZE="] + [src for src, _, _ in BUILT]
    sys.stderr.write("vrampool_build: %s\n" % " ".join(cmd))
    sys.stderr.flush()
    # A wheel is built the same whatever make called this (`make wheel
    # SANITIZE=...`): the caller's make variables stay out.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    subprocess.run(cmd, cwd=_root(), env=env, check=True, stdout=sys.stderr)


def _record_row(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [path, "sha256=" + digest, str(len(data))]


def _zip_add(z, path, data, mode):
    info = zipfile.ZipInfo(path, time.gmtime(_mtime())[:6])
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


def _wheel_files(version):
    """[(path in the wheel, bytes, mode)]: the package, the binaries, dist-info."""
    files = []
    pkg = os.path.join(_root(), "python", NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") and name != "_version.py":
            with open(os.path.join(pkg, name), "rb") as f:
                files.append((NAME + "/" + name, f.read(), 0o644))
    files.append((NAME + "/_version.py",
                  ("# written by python/vrampool_build.py from VERSION\n__version__ = %r\n" % version).encode(),
                  0o644))
    for src, dst, mode in BUILT:
        with open(os.path.join(_root(), src), "rb") as f:
            files.append((dst, f.read(), mode))
    info = "%s-%s.dist-info/" % (NAME, version)
    tag = "py3-none-" + _platform_tag()
    scripts = _pyproject().get("scripts", {})
    files += [
        (info + "METADATA", _metadata(version).encode("utf-8"), 0o644),
        (info + "WHEEL", ("Wheel-Version: 1.0\nGenerator: vrampool_build\nRoot-Is-Purelib: false\n"
                          "Tag: %s\n" % tag).encode(), 0o644),
        (info + "entry_points.txt", ("[console_scripts]\n" + "".join(
            "%s = %s\n" % kv for kv in sorted(scripts.items()))).encode(), 0o644),
    ]
    return files, info, tag


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    _make()
    files, info, tag = _wheel_files(version)
    name = "%s-%s-%s.whl" % (NAME, version, tag)
    os.makedirs(wheel_directory, exist_ok=True)
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    tmp = os.path.join(wheel_directory, name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as z:
        for path, data, mode in files:
            _zip_add(z, path, data, mode)
            writer.writerow(_record_row(path, data))
        writer.writerow([info + "RECORD", "", ""])
        _zip_add(z, info + "RECORD", record.getvalue().encode(), 0o644)
    os.replace(tmp, os.path.join(wheel_directory, name))
    return name


def _compiled(path):
    """Python's byte code (this backend's own, written beside it): never packed."""
    return "__pycache__" in path.split(os.sep) or path.endswith(".pyc")


def _sdist_files():
    """The files of the source tree that an sdist carries: git's list, or a walk."""
    root = _root()
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root, check=True,
                             capture_output=True).stdout
        return sorted(p for p in out.decode().split("\0")
                      if p and os.path.isfile(os.path.join(root, p)) and not _compiled(p))
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for dirpath, dirs, names in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirs[:] = [d for d in dirs if not (rel == "." and d in ("build", ".git"))]
        found += [os.path.normpath(os.path.join(rel, n)) for n in names
                  if n != "PKG-INFO" and not _compiled(os.path.join(rel, n))]
    return sorted(found)


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (NAME, version)
    name = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    tmp = os.path.join(sdist_directory, name + ".tmp")

    def norm(ti):
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        ti.mtime = _mtime()
        return ti

    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in _sdist_files():
            tar.add(os.path.join(_root(), rel), arcname=base + "/" + rel, recursive=False, filter=norm)
        data = _metadata(version).encode("utf-8")
        ti = norm(tarfile.TarInfo(base + "/PKG-INFO"))
        ti.size = len(data)
        tar.addfile(ti, io.BytesIO(data))
    os.replace(tmp, os.path.join(sdist_directory, name))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
