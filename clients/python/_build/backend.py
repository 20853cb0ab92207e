"""A PEP 517 build backend written with the standard library only.

`pip install clients/python` then needs nothing from a package index (the
usual setuptools backend needs setuptools and wheel, which an offline
machine may not have). It builds a pure-Python wheel of the `reckon`
package, an sdist, and an editable install (PEP 660).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "reckon"


def _project():
    """Name, version, summary and Python requirement from pyproject.toml."""
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]

    def field(key):
        m = re.search(rf'^{key}\s*=\s*"([^"]*)"', section, re.M)
        if not m:
            raise RuntimeError(f"pyproject.toml: [project] {key} is missing")
        return m.group(1)
    return field("name"), field("version"), field("description"), field("requires-python")


def _dist_name():
    name, version, _, _ = _project()
    return re.sub(r"[-_.]+", "_", name).lower(), version


def _metadata():
    name, version, summary, requires = _project()
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    return (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {summary}\n"
            f"License: Apache-2.0\nRequires-Python: {requires}\n"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: reckon-build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _sources():
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in sorted(filenames):
            if f.endswith(".py"):
                full = os.path.join(dirpath, f)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _write_wheel(wheel_directory, files):
    dist, version = _dist_name()
    info = f"{dist}-{version}.dist-info"
    files = list(files) + [(f"{info}/METADATA", _metadata().encode()), (f"{info}/WHEEL", _wheel_file().encode())]
    record = []
    name = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            z.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arcname},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist, version = _dist_name()
    info = f"{dist}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(metadata_directory, info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(arc, open(full, "rb").read()) for full, arc in _sources()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    dist, _ = _dist_name()
    return _write_wheel(wheel_directory, [(f"_{dist}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    dist, version = _dist_name()
    base = f"{dist}-{version}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "README.md", "_build/backend.py"]:
            tar.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        for full, arc in _sources():
            tar.add(full, arcname=f"{base}/{arc}")
        pkg_info = _metadata().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return name
