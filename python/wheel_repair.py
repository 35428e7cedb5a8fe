"""`auditwheel repair` for vrampool's wheel, vendoring more than the
manylinux policy asks: `make wheel` and tests/e2e/wheel.sh run it with the
python of scripts/deps.sh's wheel-tools env (auditwheel 6.8.2, pinned).

Usage: python wheel_repair.py WHEEL OUTDIR

The policies let a wheel take the X client libraries, expat and zlib from
the system (every desktop has them). The command links cairo, which links
the X ones; slim container images, where training jobs run, often lack
them, and the command would then stop at start. So this runs auditwheel
with the X libraries and zlib struck from every policy's list of system
libraries: auditwheel's own machinery vendors them into vrampool.libs/
like the rest, and the command needs nothing from the system but glibc and
expat. Expat stays the system's: Debian 12's needs glibc 2.36
(arc4random_buf), which would raise the policy from manylinux_2_35 and
leave Ubuntu 22.04 out. The policy of the result is the one an unmodified
`auditwheel show` reports (the names only leave the system's side).
"""
import json
import pathlib
import sys
import tempfile

VENDOR_ALSO = ("libX11.so.6", "libXext.so.6", "libXrender.so.1", "libz.so.1")


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    import auditwheel.main
    import auditwheel.policy as policy

    table = policy._POLICY_JSON_MAP                 # auditwheel 6.8.2: libc -> policy file
    policies = json.loads(table[policy.Libc.GLIBC].read_text())
    for p in policies:
        p["lib_whitelist"] = [lib for lib in p["lib_whitelist"] if lib not in VENDOR_ALSO]
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, "manylinux-policy.json")
        path.write_text(json.dumps(policies))
        table[policy.Libc.GLIBC] = path
        sys.argv = ["auditwheel", "repair", "-w", argv[2], argv[1]]
        return auditwheel.main.main() or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
