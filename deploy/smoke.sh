#!/usr/bin/env bash
# make image-smoke: builds deploy/Dockerfile with podman, as a user builds
# it, and runs the image's smoke test (deploy/smoke_test.go) against CI's
# PostgreSQL. Where no registry serves the Dockerfile's base images, they
# come from Debian's packages (scripts/ensure-images.sh) and are passed as
# BASE and GO_IMAGE. The Go build inside the image reads this machine's
# module cache (mounted, GOPROXY=off: the build fetches nothing) and
# build cache; neither ends up in the image.
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/podman.sh
scripts/ensure-images.sh
go mod download

revision=$(git rev-parse HEAD)
buildvcs=auto
if [ -f .git ]; then
  # A git worktree: its .git points outside the build context, so the
  # build cannot read the revision (the label still names it).
  buildvcs=false
fi
start=$(date +%s)
"${PODMAN[@]}" build "${BUILD_LIMITS[@]}" --network host \
  -v "$(go env GOMODCACHE):/go/pkg/mod" -v "$(go env GOCACHE):/root/.cache/go-build" \
  --build-arg GOPROXY=off --build-arg GO_IMAGE="$GO_IMAGE" --build-arg BASE="$BASE_IMAGE" --build-arg BUILDVCS="$buildvcs" \
  --build-arg REVISION="$revision" --build-arg VERSION="$(git describe --tags --always --dirty)" \
  -f deploy/Dockerfile -t "$IMAGE" .
built=$(date +%s)
size=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")
echo "image $IMAGE: $((size / 1000000)) MB, built in $((built - start)) s" >&2

admin=${SMOKE_ADMIN_URL:-postgres://127.0.0.1:5432/postgres?sslmode=disable}
RECKON_IMAGE="$IMAGE" SMOKE_PODMAN="${PODMAN[*]}" SMOKE_RUN_ARGS="${LIMITS[*]}" SMOKE_ADMIN_URL="$admin" \
  SMOKE_REVISION="$([ "$buildvcs" = false ] || echo "$revision")" go test -tags image -count=1 -timeout 10m -run '^TestImageSmoke$' -v ./deploy/
echo "image smoke: build $((built - start)) s, smoke $(($(date +%s) - built)) s" >&2
