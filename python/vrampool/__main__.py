"""`python -m vrampool ARGS` and the installed `vrampool` script: both run
the packaged command (vrampool/bin/vrampool) with ARGS, in place of this
Python process (exec), so that signals, the exit status and a death by
signal are the command's own."""
import os
import sys

from . import command_path


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        exe = command_path()
    except FileNotFoundError as e:
        sys.stderr.write("vrampool: %s\n" % e)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(exe, ["vrampool"] + args)
    except OSError as e:
        sys.stderr.write("vrampool: cannot run %s: %s\n" % (exe, e.strerror))
        return 126


if __name__ == "__main__":
    sys.exit(main())
