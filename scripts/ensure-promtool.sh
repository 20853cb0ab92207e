#!/usr/bin/env bash
# Installs what `make alerts` needs: promtool, from Debian's prometheus
# package (the alerting rules' unit tests and the dashboard's queries are
# checked by the promtool Prometheus itself ships).
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's prometheus package for promtool (make alerts)" >&2
  export DEBIAN_FRONTEND=noninteractive
  (apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus; }) >&2
else
  echo "promtool is missing: make alerts checks the Prometheus rules with it; install Debian's prometheus package (as root: apt-get install prometheus)" >&2
  exit 1
fi
