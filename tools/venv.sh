#!/bin/sh
# `make install`: build or refresh the virtualenv with a Python that pyproject.toml's
# requires-python accepts.
#
#   PYTHON=…   use this interpreter (checked, never swapped for another one);
#              otherwise keep the venv's interpreter while it works and is supported, else take the
#              first supported one of python3, python3.11, python3.12, python3.13 and pyenv's
#              installed versions.
#   VENV=…     the virtualenv folder (default .venv).
#
# A venv cannot change interpreter in place, so one built with another interpreter (or a broken
# one) is removed and built again; one whose pyproject.toml or setup.py changed is reinstalled.
# The stamp $VENV/.installed records the interpreter and a checksum of those two files.
#
#   tools/venv.sh           do it
#   tools/venv.sh --plan    print what it would do (create, rebuild, install, up-to-date) and the
#                           interpreter, and change nothing
set -eu

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-}
STAMP="$VENV/.installed"
MODE=${1:-run}

spec=$(sed -n 's/^requires-python *= *"\(.*\)"/\1/p' pyproject.toml)
lo=$(printf '%s\n' "$spec" | sed -n 's/.*>= *3\.\([0-9][0-9]*\).*/\1/p')
hi=$(printf '%s\n' "$spec" | sed -n 's/.*< *3\.\([0-9][0-9]*\).*/\1/p')
if [ -z "$lo" ] || [ -z "$hi" ]; then
    echo "tools/venv.sh: cannot read requires-python (>=3.X,<3.Y) from pyproject.toml: '$spec'" >&2
    exit 1
fi

# Kept to syntax every Python since 2.6 parses, so an old interpreter answers "no" instead of failing.
PROBE='import sys, os
v = sys.version_info
ver = "%d.%d.%d" % (v[0], v[1], v[2])
lo, hi = int(sys.argv[1]), int(sys.argv[2])
if v[0] != 3 or not (lo <= v[1] < hi):
    print("no " + ver)
else:
    try:
        import ensurepip, venv
        print("ok " + ver + " " + os.path.realpath(sys.base_prefix) + " " + sys.executable)
    except ImportError:
        print("novenv " + ver)'

# probe CMD: one line, "ok VERSION BASE_PREFIX EXECUTABLE", "no VERSION", "novenv VERSION" or "missing".
probe() {
    out=$("$1" -c "$PROBE" "$lo" "$hi" 2>/dev/null | tail -n 1) || out=""
    case "$out" in
        ok\ *|no\ *|novenv\ *) printf '%s\n' "$out" ;;
        *) echo missing ;;
    esac
}

# why CMD PROBE_LINE: a phrase for the error message.
why() {
    case "$2" in
        no\ *) echo "$1 is Python ${2#no }" ;;
        novenv\ *) echo "$1 is Python ${2#novenv } without the venv module (Debian: apt-get install python3-venv)" ;;
        *) echo "$1 not found (or it does not run)" ;;
    esac
}

ADVICE="install one (e.g. 'pyenv install 3.12' or 'apt-get install python3.12 python3.12-venv') or name it: make PYTHON=/path/to/python3.12 …"

chosen=""
if [ -n "$PYTHON" ]; then
    line=$(probe "$PYTHON")
    case "$line" in
        ok\ *) chosen=$line ;;
        *) echo "make: PYTHON=$PYTHON cannot be used: $(why "$PYTHON" "$line"); fleetgrade needs Python $spec" >&2
           exit 1 ;;
    esac
elif [ -x "$VENV/bin/python" ]; then
    line=$(probe "$VENV/bin/python")
    case "$line" in ok\ *) chosen=$line ;; esac
fi
if [ -z "$chosen" ]; then
    tried=""
    set -- python3 python3.11 python3.12 python3.13
    pyenv_root=${PYENV_ROOT:-${HOME:-/nonexistent}/.pyenv}
    for p in "$pyenv_root"/versions/3.*/bin/python3; do
        [ -x "$p" ] && set -- "$@" "$p"
    done
    for cand in "$@"; do
        line=$(probe "$cand")
        case "$line" in
            ok\ *) chosen=$line; break ;;
            *) tried="$tried; $(why "$cand" "$line")" ;;
        esac
    done
    if [ -z "$chosen" ]; then
        echo "make: no supported Python found: fleetgrade needs Python $spec (${tried#; }); $ADVICE" >&2
        exit 1
    fi
fi

# "ok VERSION BASE_PREFIX EXECUTABLE": the executable may hold spaces, so it is the rest of the line.
rest=${chosen#ok }
version=${rest%% *}
rest=${rest#* }
base=${rest%% *}
exe=${rest#* }
want="python $version $base"
deps="deps $(cat pyproject.toml setup.py | cksum)"

have_python=""
if [ -x "$VENV/bin/python" ]; then
    line=$(probe "$VENV/bin/python")
    case "$line" in
        ok\ *) r=${line#ok }; have_python="python ${r%% *} $(printf '%s' "${r#* }" | cut -d' ' -f1)" ;;
    esac
fi
if [ ! -e "$VENV" ]; then
    plan=create
elif [ "$have_python" != "$want" ]; then
    plan=rebuild
elif [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$(printf '%s\n%s' "$want" "$deps")" ]; then
    plan=install
else
    plan=up-to-date
fi

if [ "$MODE" = "--plan" ]; then
    echo "$plan $version $exe"
    exit 0
fi
case "$plan" in
    up-to-date) exit 0 ;;
    rebuild) echo "make: rebuilding $VENV for Python $version ($exe); it held ${have_python:-a broken interpreter}"
             rm -rf "$VENV" ;;
    create) echo "make: creating $VENV with Python $version ($exe)" ;;
esac
if [ "$plan" != install ]; then
    "$exe" -m venv "$VENV"
fi
rm -f "$STAMP"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e '.[test,dask]'
printf '%s\n%s' "$want" "$deps" > "$STAMP"
