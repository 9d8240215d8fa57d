#!/usr/bin/env bash
# Installs what the tests need: PostgreSQL's server binaries (Debian
# package; the store tests start a throwaway cluster with them), `openssl`
# (the command: it makes that cluster's throwaway CA and certificate), and what
# the graph tests parse flowc's output with: Graphviz `dot`
# (Debian package) for the DOT output, and the real Mermaid parser (npm
# packages pinned in tools/mermaid-check/package-lock.json, run under jsdom
# in Node) for the Mermaid output. No browser is downloaded.
#
# Idempotent: safe on a fresh Debian machine as root and on every re-run;
# each step is skipped when what it installs is already there.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
checker_dir="$repo_root/tools/mermaid-check"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo "$@"
  fi
}

apt_updated=0
# `apt-get update` only when a package has no install candidate: a fresh
# machine may have empty package lists, a warm one should not hit the network.
apt_install() {
  local missing=()
  for package in "$@"; do
    if ! apt-cache policy "$package" 2>/dev/null | grep -q 'Candidate: [^(]'; then
      missing+=("$package")
    fi
  done
  if [ "${#missing[@]}" -gt 0 ] && [ "$apt_updated" -eq 0 ]; then
    as_root apt-get update
    apt_updated=1
  fi
  # Stale lists can name versions the mirror no longer has: refresh them
  # once and try again.
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; then
    if [ "$apt_updated" -eq 1 ]; then
      return 1
    fi
    as_root apt-get update
    apt_updated=1
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
  fi
}

if ! command -v dot >/dev/null 2>&1; then
  echo "install-test-deps: installing graphviz"
  apt_install graphviz
fi

# The server binaries live in /usr/lib/postgresql/VERSION/bin, not on PATH.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "install-test-deps: installing postgresql"
  apt_install postgresql
fi

if ! command -v openssl >/dev/null 2>&1; then
  echo "install-test-deps: installing openssl"
  apt_install openssl
fi

# The playground test (tests/it/serve_page.rs) drives headless Chromium
# through the DevTools protocol; Debian's package, not a browser download.
# A font is named too: without recommends Chromium brings none, and the
# page's screenshot would show boxes for letters.
if ! command -v chromium >/dev/null 2>&1 || [ ! -d /usr/share/fonts/truetype/dejavu ]; then
  echo "install-test-deps: installing chromium"
  apt_install chromium fonts-dejavu-core
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-test-deps: installing nodejs and npm"
  apt_install nodejs npm
fi

# `npm ci` installs exactly the locked versions; it is re-run only when the
# lock file changed since the last install (the stamp holds its checksum).
stamp="$checker_dir/node_modules/.flowc-lock-sha256"
lock_sum="$(sha256sum "$checker_dir/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
  echo "install-test-deps: npm ci in tools/mermaid-check"
  (cd "$checker_dir" && npm ci --ignore-scripts --no-audit --no-fund)
  echo "$lock_sum" >"$stamp"
fi

dot -V
echo "install-test-deps: postgresql, openssl, graphviz and the mermaid checker are ready"
