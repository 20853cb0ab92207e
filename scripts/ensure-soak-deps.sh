#!/usr/bin/env bash
# Installs what `make soak` needs beyond the Go build: the PostgreSQL server
# programs (initdb, pg_ctl, postgres) for the soak's private cluster, and
# bubblewrap for the run_command sandbox. The soak never uses the machine's
# main cluster; it only needs the programs.
set -euo pipefail
have_pg() {
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && return 0
  done
  return 1
}
install() {
  local what=$1; shift
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing $what" >&2
    (apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@"; }) >&2
  else
    echo "$what is missing: install it (apt-get install $*) and run make soak again" >&2
    exit 1
  fi
}
have_pg || install "the PostgreSQL server programs (the soak's private cluster)" postgresql
have_pg || { echo "PostgreSQL was installed but initdb/pg_ctl are not on PATH or in /usr/lib/postgresql/*/bin; pass SOAK_PG_BIN=<dir>" >&2; exit 1; }
command -v bwrap >/dev/null 2>&1 || install "bubblewrap (run_command sandbox)" bubblewrap
