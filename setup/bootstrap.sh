#!/usr/bin/env bash
# Sets up everything the project needs, from nothing, and is safe to run again:
# checks the prerequisites, creates the virtualenv, installs the pinned packages
# and caches the Delta Lake jars; with --with-chromium (`make test`) also installs
# Debian's chromium for the docs site test. Every step is skipped when already done.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
export LAKEHISTORY_HOME="${LAKEHISTORY_HOME:-$root/.local}"
local_dir="$LAKEHISTORY_HOME"
venv="$local_dir/venv"
stamp="$venv/.installed"

fail() { echo "setup: $*" >&2; exit 1; }

# --- prerequisites -------------------------------------------------------------
python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || fail "Python 3.11+ is required ('$python' not found)."
"$python" - <<'PY' || fail "Python 3.11+ is required (found $("$python" -V 2>&1))."
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
command -v java >/dev/null 2>&1 || fail "Java 17+ is required (no 'java' on PATH; set JAVA_HOME or install a JDK)."
java_major=$(java -version 2>&1 | sed -nE '1s/.*version "([0-9]+)(\.[0-9]+)*.*/\1/p')
[ -n "$java_major" ] && [ "$java_major" -ge 17 ] || fail "Java 17+ is required (found: $(java -version 2>&1 | head -n 1))."

# --- headless Chromium for the docs site test (Debian's package; no browser download) ---
# Only with --with-chromium (what `make test` passes): the demo needs no browser.
if [ "${1:-}" = "--with-chromium" ] && [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing Debian's chromium package (the docs site test opens the site in it)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "Chromium is required: run as root or install sudo, or run 'apt-get install chromium' as root."
    sudo="sudo"
  fi
  command -v apt-get >/dev/null 2>&1 || fail "Chromium is required at /usr/bin/chromium (no apt-get here; install Debian's 'chromium' package)."
  { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
    || fail "could not install Debian's 'chromium' package (apt-get update && apt-get install -y --no-install-recommends chromium failed)."
  [ -x /usr/bin/chromium ] || fail "Debian's 'chromium' package is installed but /usr/bin/chromium is missing."
fi

# --- virtualenv and pinned packages ----------------------------------------------
mkdir -p "$local_dir"
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating virtualenv in .local/venv"
  "$python" -m venv "$venv"
fi
# Reinstall only when the pins or the package metadata changed.
wanted=$(cat "$root/setup/requirements.lock" "$root"/{dbt-sparksession,lakehistory,tools}/pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  echo "setup: installing pinned packages"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -r "$root/setup/requirements.lock"
  # The three distributions of this repository (README "Layout"), editable.
  for part in dbt-sparksession lakehistory tools; do
    "$venv/bin/python" -m pip install --quiet --no-deps --config-settings editable_mode=compat -e "$root/$part"
  done
  echo "$wanted" > "$stamp"
fi

# --- Delta Lake jars (downloaded once, then used offline) ------------------------------
"$venv/bin/python" -m lakehistory.runtime.jars ensure

# Spark's log settings, where the profile looks for them.
cp "$root/setup/log4j2.properties" "$local_dir/log4j2.properties"
