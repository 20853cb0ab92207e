# Shared by scripts/ensure-images.sh and deploy/smoke.sh (sourced): how
# podman runs on CI's machines, and the images' names.
#
# runc: crun refuses hybrid cgroup hierarchies (v1 controllers beside a
# v2 mount). The rlimits: podman raises a container's to the host's hard
# limits, which needs CAP_SYS_RESOURCE where the host's are above the
# machine's own ceiling; lowered, they need nothing.
PODMAN=(podman --runtime "${PODMAN_RUNTIME:-runc}")
LIMITS=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
BUILD_LIMITS=("${LIMITS[@]}")
GO_VERSION=$(go env GOVERSION)
BASE_IMAGE=localhost/debian:bookworm-slim
GO_IMAGE=localhost/golang:${GO_VERSION#go}-bookworm
IMAGE=${RECKON_IMAGE:-localhost/reckon:dev}
