#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers at DATABASE_URL's host and port (or
# the local default). Starts an installed-but-stopped local cluster; otherwise
# says exactly how to get one.
set -euo pipefail
url="${DATABASE_URL:-postgres://127.0.0.1:5432/reckon?sslmode=disable}"
hostport="${url#*://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
host="${hostport%%:*}"; port="${hostport##*:}"
[ "$port" = "$host" ] && port=5432
[ -z "$host" ] && host=127.0.0.1

ready() { pg_isready -q -h "$host" -p "$port" 2>/dev/null; }

if ! command -v pg_isready >/dev/null 2>&1; then
  echo "PostgreSQL client tools are not installed. Install a server, e.g.:" >&2
  echo "  apt-get install -y postgresql   # Debian/Ubuntu; then re-run make" >&2
  echo "or set DATABASE_URL to a reachable PostgreSQL 15+." >&2
  exit 1
fi
if ready; then exit 0; fi
case "$host" in
  127.0.0.1|localhost|::1) ;;
  *) echo "PostgreSQL at $host:$port does not answer; fix DATABASE_URL or start that server." >&2; exit 1 ;;
esac
if command -v pg_lsclusters >/dev/null 2>&1 && [ -n "$(pg_lsclusters -h 2>/dev/null)" ]; then
  while read -r ver name cport status _; do
    if [ "$cport" = "$port" ] && [ "$status" != "online" ]; then
      echo "starting local PostgreSQL cluster $ver/$name on port $port" >&2
      pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start
    fi
  done < <(pg_lsclusters -h)
  for _ in $(seq 1 30); do ready && exit 0; sleep 0.5; done
fi
echo "No PostgreSQL answers on $host:$port and no stopped local cluster was found." >&2
echo "Install one (apt-get install -y postgresql, then pg_ctlcluster 15 main start)" >&2
echo "or set DATABASE_URL to a reachable server." >&2
exit 1
