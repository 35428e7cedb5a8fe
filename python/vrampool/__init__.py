"""vrampool from Python: where the library is, and the files it writes.

The wheel carries the preloaded library and the `vrampool` command inside
this package, laid out as `make install` lays out a prefix:

  vrampool/bin/vrampool                    the command (run, inspect, report)
  vrampool/lib/vrampool/libvrampool.so     the library it preloads
  vrampool/share/man/man1/vrampool.1       its manual page

The command finds the library from its own real path (../lib/vrampool/),
so it works from any directory and in any environment. The installed
`vrampool` script and `python -m vrampool` both run that command.

  library_path()       the library, for LD_PRELOAD set by hand
  command_path()       the command
  load_dump(path)      a stats dump (VRAMPOOL_STATS, --stats) as a dict
  read_telemetry(path) the records of a telemetry file (VRAMPOOL_TELEMETRY)

Standard library only.
"""
import json
import os

try:
    from ._version import __version__
except ImportError:             # the source tree, not a built wheel
    __version__ = "unknown"

__all__ = ["__version__", "library_path", "command_path", "load_dump", "read_telemetry"]

_HERE = os.path.dirname(os.path.realpath(__file__))


def _packaged(*parts):
    path = os.path.join(_HERE, *parts)
    if not os.path.exists(path):
        raise FileNotFoundError(
            "%s is missing: this vrampool package was not installed from a built wheel "
            "(make wheel && pip install build/wheel/vrampool-*.whl)" % path)
    return path


def library_path():
    """The real path of libvrampool.so, the file `vrampool run` preloads."""
    return _packaged("lib", "vrampool", "libvrampool.so")


def command_path():
    """The real path of the vrampool command (an executable, not a script)."""
    return _packaged("bin", "vrampool")


def load_dump(path):
    """The stats dump at PATH (the library's JSON file) as a dict.

    Raises OSError when it cannot be read, ValueError when it is not JSON or
    not a vrampool dump (an object with the "vrampool" key)."""
    with open(path, encoding="utf-8") as f:
        dump = json.load(f)
    if not isinstance(dump, dict) or "vrampool" not in dump:
        raise ValueError("%s: not a vrampool stats dump (no \"vrampool\" key)" % path)
    return dump


def read_telemetry(path):
    """Yields the records (dicts) of the telemetry file at PATH, one a line.

    As `vrampool report --telemetry` reads it: a last line cut short (the
    job was killed while writing it) is dropped; any other line that is not
    a JSON object raises ValueError with its line number."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    cut = lines.pop()                   # "" when the file ends with a newline
    for n, line in enumerate(lines + [cut], 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            if n > len(lines):
                return                  # the last line, cut short by a kill
            raise ValueError("%s:%d: not a JSON line: %s" % (path, n, e)) from None
        if not isinstance(rec, dict):
            raise ValueError("%s:%d: not a JSON object" % (path, n))
        yield rec
