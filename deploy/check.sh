#!/usr/bin/env bash
# make deploy-check: the deployment kit's files as their own tools read
# them. systemd-analyze verify on the units (their ExecStart pointed at a
# binary built here; any warning fails), and docker-compose config on the
# compose file (Debian's docker-compose validates it against the Compose
# schema without a daemon). deploy/deploy_test.go checks what they mean.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need[*]} (make deploy-check)" >&2
    export DEBIAN_FRONTEND=noninteractive
    (apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; }) >&2
  else
    echo "${need[*]} missing (as root: apt-get install --no-install-recommends ${need[*]})" >&2
    exit 1
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/reckon" ./cmd/reckon
for unit in deploy/systemd/*.service; do
  sed "s|/usr/local/bin/reckon|$work/reckon|g" "$unit" > "$work/$(basename "$unit")"
done
out=$(cd "$work" && systemd-analyze verify ./*.service 2>&1) || { echo "$out" >&2; exit 1; }
if [ -n "$out" ]; then
  echo "systemd-analyze verify warns:" >&2
  echo "$out" >&2
  exit 1
fi
echo "systemd-analyze verify: $(ls deploy/systemd/*.service | wc -l) units clean" >&2
POSTGRES_PASSWORD=check RECKON_TOKENS=check:operator:check-secret \
  docker-compose -f deploy/compose.yaml --profile gateway config -q
echo "docker-compose config: deploy/compose.yaml valid" >&2
