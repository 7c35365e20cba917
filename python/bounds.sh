#!/usr/bin/env bash
# The package as a user installs it (pip install ./python, not editable, not
# the lock), at both ends of its dependency ranges, each in a fresh venv with
# only the [test] extra (the JAX, PyTorch and tf.data tests skip there):
#
#   upper: a venv already holding the newest pyarrow on PyPI that the range
#          admits ($PYARROW_UPPER); pip install './python[test]' must keep it
#          (the install must not downgrade it), and py.typed must ship.
#   lower: every dependency at its lower bound (bounds-lower.txt, checked
#          against pyproject.toml), as constraints.
#
# Then a subset of the tests against a real stack (TESTS: the client, wait,
# stream and fork tests; the full suite is make python-test's). pip's cache
# is the user's, so a second run downloads nothing. Venvs under
# $BOUNDS_DIR (default: a temporary directory, removed at the end).
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3.11}
PYARROW_UPPER=${PYARROW_UPPER:-26.0.1}
TESTS=${TESTS:-tests/test_client.py tests/test_wait_stream.py tests/test_fork.py}
dir=${BOUNDS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/sig-py-bounds.XXXXXX")}
[ -n "${BOUNDS_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT
pipq() { "$@" -q --disable-pip-version-check --no-compile; }

# bounds-lower.txt holds pyproject's lower bounds, no more, no less.
want=$(sed -nE 's/^ *"([A-Za-z0-9_.-]+)>=([^,"]+).*/\1==\2/p' pyproject.toml | sed -n '/^pyarrow==/,/^googleapis/p' | sort)
have=$(grep -v '^#' bounds-lower.txt | sort)
if [ "$want" != "$have" ]; then
	echo "bounds-lower.txt does not hold pyproject.toml's lower bounds:"; diff <(echo "$want") <(echo "$have") || true
	exit 1
fi

# Say so when PyPI has a newer pyarrow than the upper run's (pyproject's
# range, then PYARROW_UPPER, want moving); no failure: the run stays
# reproducible.
newest=$("$PYTHON" -m pip index versions pyarrow 2>/dev/null | sed -nE '1s/^pyarrow \((.*)\)$/\1/p' || true)
if [ -n "$newest" ] && [ "$newest" != "$PYARROW_UPPER" ]; then
	echo "note: PyPI's newest pyarrow is $newest; the upper run installs $PYARROW_UPPER (PYARROW_UPPER)"
fi

# The repository's binaries, built once for both runs.
bin="$dir/bin"
(cd .. && go build -o "$bin/" ./cmd/sigd ./cmd/sigctl ./cmd/reader)
minio=${SIG_MINIO_BIN:-$PWD/../bin/minio}

run() {
	local name=$1 venv="$dir/$1"
	local t0=$SECONDS
	"$PYTHON" -m venv "$venv"
	if [ "$name" = upper ]; then
		pipq "$venv/bin/pip" install "pyarrow==$PYARROW_UPPER"
		pipq "$venv/bin/pip" install './[test]'
	else
		pipq "$venv/bin/pip" install -c bounds-lower.txt './[test]'
	fi
	"$venv/bin/pip" check
	"$venv/bin/python" -I - "$name" "$PYARROW_UPPER" <<'PY'
import importlib.metadata as md, os, sys
import pyarrow, sig_client
name, upper = sys.argv[1], sys.argv[2]
site = os.path.dirname(os.path.dirname(sig_client.__file__))
assert "site-packages" in site, f"sig_client imported from {sig_client.__file__}, not the venv's install"
assert os.path.exists(os.path.join(os.path.dirname(sig_client.__file__), "py.typed")), "py.typed not installed"
if name == "upper":
    assert pyarrow.__version__ == upper, f"pip replaced pyarrow {upper} with {pyarrow.__version__}"
else:
    want = dict(l.strip().split("==") for l in open("bounds-lower.txt") if l.strip() and not l.startswith("#"))
    for pkg, v in want.items():
        assert md.version(pkg) == v, f"{pkg} {md.version(pkg)}, want {v}"
print(f"{name}: sig-client {md.version('sig-client')} with pyarrow {pyarrow.__version__}, numpy {md.version('numpy')}, "
      f"grpcio {md.version('grpcio')}, protobuf {md.version('protobuf')}, installed from {site}")
PY
	echo "$name: venv in $((SECONDS - t0)) s"
	# pytest's own script (not python -m, which would put the source tree
	# on sys.path): the installed package is tested.
	SIG_PY_BIN="$bin" SIG_MINIO_BIN="$minio" "$venv/bin/pytest" -q -p no:cacheprovider $TESTS
}
run upper
run lower
