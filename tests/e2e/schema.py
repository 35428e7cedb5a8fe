#!/usr/bin/env python3
"""Validates vrampool dumps and telemetry lines against the checked-in JSON
Schemas (docs/schema/, issue 19).

usage: schema.py dump FILE...         each FILE one dump (one JSON object)
       schema.py telemetry FILE...    each line of each FILE one telemetry object

Exit status 0 when every object validates; 1 with one line per error
(FILE:LINE: key path: message); 2 when python3-jsonschema is missing
(schema.sh then prints SKIP). check_stats.py imports errors() to validate
every dump the other end-to-end scripts compare with the device.
"""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCHEMAS = {
    "dump": os.path.join(ROOT, "docs", "schema", "vrampool-dump.schema.json"),
    "telemetry": os.path.join(ROOT, "docs", "schema", "vrampool-telemetry.schema.json"),
}

try:
    import jsonschema
except ImportError:  # the caller says SKIP
    jsonschema = None

_validators = {}


def validator(kind):
    """The Draft 2020-12 validator of one schema (checked itself first)."""
    if kind not in _validators:
        schema = json.load(open(SCHEMAS[kind]))
        jsonschema.Draft202012Validator.check_schema(schema)
        _validators[kind] = jsonschema.Draft202012Validator(schema)
    return _validators[kind]


def errors(kind, obj, where):
    """Lines naming each way obj breaks the schema of kind ([] when it holds, or without jsonschema)."""
    if jsonschema is None:
        return []
    out = []
    for e in sorted(validator(kind).iter_errors(obj), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in e.absolute_path) or "(top)"
        out.append("%s: %s: %s" % (where, path, e.message))
    return out


def main(argv):
    if len(argv) < 3 or argv[1] not in SCHEMAS:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if jsonschema is None:
        print("python3-jsonschema is not installed", file=sys.stderr)
        return 2
    kind, bad, seen = argv[1], [], 0
    for path in argv[2:]:
        if kind == "dump":
            bad += errors(kind, json.load(open(path)), path)
            seen += 1
            continue
        for n, line in enumerate(open(path), 1):
            bad += errors(kind, json.loads(line), "%s:%d" % (path, n))
            seen += 1
    if seen == 0:
        bad.append("nothing to validate")
    print("\n".join(bad) if bad else "%d %s object(s) valid" % (seen, kind))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
