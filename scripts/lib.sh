# shellcheck shell=bash
# Shared by scripts/start, scripts/test and .ci/run: install what a Debian machine is missing, and
# bring up the local services the project needs. Sourced, not run.

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs the Debian packages given whose status is not "installed", with one apt-get update.
apt_install_missing() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "==> installing ${missing[*]}"
    # A half-configured package (seen: a systemd upgrade) makes every install fail with "Unmet
    # dependencies" until it is finished.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

# The Rust toolchain (stable, with rustfmt and clippy). Debian 12's own cargo is too old, so a
# machine without one gets rustup: Debian's package where it has one (13 and later), else the
# official installer.
ensure_rust() {
    export PATH="$HOME/.cargo/bin:$PATH"
    if ! command -v cargo >/dev/null 2>&1; then
        echo "==> installing the Rust toolchain"
        if apt-cache show rustup >/dev/null 2>&1; then
            apt_install_missing rustup
        else
            apt_install_missing curl
            curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
        fi
        rustup default stable
    fi
    if command -v rustup >/dev/null 2>&1; then
        rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
    fi
}

# What building and running svc needs: a C compiler for the bundled sqlite, libpcap for the
# sniffer, and nats-server; and what its tests need: systemd-analyze (from the systemd package) to
# verify the generated units.
ensure_build_deps() {
    apt_install_missing build-essential pkg-config ca-certificates nats-server podman runc iptables libpcap-dev
    command -v systemd-analyze >/dev/null 2>&1 || apt_install_missing systemd
    ensure_rust
}

# A container engine for the fleet: SVC_DOCKER_HOST when it answers, else Docker's socket, else a
# podman API service of the project's own on DIR/podman.sock, configured by DIR/containers.conf
# (runc, cgroupfs: what these kernels need), nothing written to the host's global configuration.
# Exports SVC_DOCKER_HOST; a service it starts has its pid in DIR/podman.pid.
ensure_container_engine() {
    local dir=${1:?"ensure_container_engine: name a directory for the socket and files of the engine"}
    engine_answers() { curl -sf --unix-socket "${1#unix://}" http://engine/_ping >/dev/null 2>&1; }
    apt_install_missing curl
    if [ -n "${SVC_DOCKER_HOST:-}" ] && engine_answers "$SVC_DOCKER_HOST"; then return 0; fi
    if engine_answers /var/run/docker.sock; then
        export SVC_DOCKER_HOST=unix:///var/run/docker.sock
        return 0
    fi
    apt_install_missing podman runc iptables
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    cat >"$dir/containers.conf" <<'CONF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
CONF
    export SVC_DOCKER_HOST="unix://$dir/podman.sock"
    engine_answers "$SVC_DOCKER_HOST" && return 0
    echo "==> starting podman's Docker-compatible API on $SVC_DOCKER_HOST"
    CONTAINERS_CONF="$dir/containers.conf" nohup podman system service --time 0 "$SVC_DOCKER_HOST" \
        >"$dir/podman.log" 2>&1 &
    echo $! >"$dir/podman.pid"
    for _ in $(seq 1 50); do
        engine_answers "$SVC_DOCKER_HOST" && return 0
        sleep 0.2
    done
    echo "podman's API service did not come up; see $dir/podman.log" >&2
    return 1
}

# What the sniffer's tests run against real packets: network namespaces (iproute2), the TLS peers
# (openssl, curl), a recorder (tcpdump) and the reference fingerprinters: tshark (JA3/JA3S) and
# FoxIO's ja4plus (JA4/JA4S/JA4L; from PyPI into a project-local virtualenv put on PATH).
ensure_sniffer_test_tools() {
    apt_install_missing iproute2 openssl curl tcpdump tshark python3 python3-venv
    command -v ja4plus >/dev/null 2>&1 && return 0
    local venv=.svc/venv
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check ja4plus==1.4.0
    export PATH="$PWD/$venv/bin:$PATH"
}

# The threat-intel exports' validators and clients (PyPI), into the same project-local virtualenv,
# put on PATH: OASIS's stix2-validator, stix2 and taxii2-client, CIRCL's PyMISP, and jsonschema for
# the ATT&CK Navigator layer. Pinned majors, so a new release cannot change what a run checks.
ensure_prober_test_tools() {
    # Real peers for the prober's tests (a TLS server, Debian's OpenSSH server, a capture, ping for a
    # path's readiness) and the references its fingerprints are checked against: pyjarm (JARM) and
    # ssh-audit (HASSH).
    apt_install_missing iproute2 iputils-ping openssl openssh-server tcpdump python3 python3-venv
    local venv=.svc/venv
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    if ! "$venv/bin/python" -c 'import jarm' 2>/dev/null || [ ! -x "$venv/bin/ssh-audit" ]; then
        echo "==> installing the prober's references into $venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check 'pyjarm==0.0.5' 'ssh-audit>=3.3,<4'
    fi
    export PATH="$PWD/$venv/bin:$PATH"
}
ensure_intel_test_tools() {
    apt_install_missing python3 python3-venv
    local venv=.svc/venv
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    if ! "$venv/bin/python" -c 'import stix2validator, stix2, pymisp, taxii2client, jsonschema' 2>/dev/null; then
        echo "==> installing the threat-intel validators into $venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check 'stix2-validator>=3.3,<4' 'stix2>=3,<4' \
            'pymisp>=2.5,<3' 'taxii2-client>=2.3,<3' 'jsonschema>=4,<5'
    fi
    export PATH="$PWD/$venv/bin:$PATH"
}

# The scale-out tests' load balancer (haproxy, in front of several `svc api` replicas) and the
# MariaDB client they read the lease table with.
ensure_scale_out_test_tools() {
    apt_install_missing haproxy mariadb-client
}

# Prometheus (Debian's package), which the metrics tests start on a port of their own to scrape svc.
# The package's own service is left alone: the tests never use it.
ensure_observability_test_tools() {
    apt_install_missing prometheus
}

# The readers the canary baits are opened with in their tests: poppler's pdftotext and pdfinfo, the
# OpenSSH client (ssh-keygen, ssh -G), git, and python-docx (PyPI, into the project-local virtualenv
# put on PATH; Python's own INI, XML and HTML parsers read the rest); and dig (dnsutils), which asks
# the canary DNS listener.
ensure_canary_test_tools() {
    apt_install_missing poppler-utils openssh-client git python3 python3-venv dnsutils
    local venv=.svc/venv
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    if ! "$venv/bin/python" -c 'import docx' 2>/dev/null; then
        echo "==> installing python-docx into $venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check 'python-docx>=1.1,<2'
    fi
    export PATH="$PWD/$venv/bin:$PATH"
}

# MariaDB installed and answering on 127.0.0.1:3306, started here if it is stopped.
ensure_mariadb_running() {
    apt_install_missing mariadb-server mariadb-client
    # `mariadb-admin ping` succeeds whenever the server answers, even with access denied.
    mariadb-admin --protocol=tcp -h 127.0.0.1 -P 3306 ping >/dev/null 2>&1 && return 0
    echo "==> starting MariaDB"
    if [ -d /run/systemd/system ]; then
        as_root systemctl start mariadb
    else
        as_root install -d -o mysql -g mysql /run/mysqld
        as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    fi
    for _ in $(seq 1 60); do
        mariadb-admin --protocol=tcp -h 127.0.0.1 -P 3306 ping >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    echo "MariaDB did not come up on 127.0.0.1:3306" >&2
    return 1
}

# Sets SVC_TEST_MYSQL_URL when it is unset: a `svc_test` account on the local MariaDB that may
# create and drop the `svc_test_*` databases the tests make, one per test.
ensure_mysql_test_url() {
    [ -n "${SVC_TEST_MYSQL_URL:-}" ] && return 0
    ensure_mariadb_running
    as_root mariadb -u root <<'SQL'
CREATE USER IF NOT EXISTS 'svc_test'@'127.0.0.1' IDENTIFIED BY 'svc_test';
GRANT ALL PRIVILEGES ON `svc\_test\_%`.* TO 'svc_test'@'127.0.0.1';
SQL
    export SVC_TEST_MYSQL_URL="mysql://svc_test:svc_test@127.0.0.1:3306/svc_test"
}

# Writes FILE with fresh local secrets unless it exists, and prints the admin's password that once.
ensure_local_env() {
    local file=$1
    [ -f "$file" ] && return 0
    local dir jwt_secret admin_password
    dir=$(dirname "$file")
    mkdir -p "$dir"
    jwt_secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    admin_password=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
    (
        umask 077
        cat >"$file" <<ENV
# Generated on $(date -u +%Y-%m-%dT%H:%M:%SZ). Keep it private; delete it to start afresh.
SVC_JWT_SECRET=$jwt_secret
SVC_ADMIN_PASSWORD=$admin_password
SVC_DATA_DIR=$dir/data
ENV
    )
    echo "==================================================================="
    echo " Dashboard login: ${SVC_ADMIN_USER:-admin} / $admin_password"
    echo " Shown once; you must choose a new password at first login."
    echo "==================================================================="
}

# Exports every KEY=VALUE of FILE that the caller has not already set.
load_env_file() {
    local key value
    while IFS='=' read -r key value; do
        case "$key" in '' | \#*) continue ;; esac
        if [ -z "${!key+x}" ]; then export "$key=$value"; fi
    done <"$1"
}

# Schemathesis (PyPI), in a virtualenv of its own under ~/.cache, for scripts/schemathesis: the
# path of its command in SCHEMATHESIS. A pinned major version, so a new release cannot change what
# a run checks unannounced.
ensure_schemathesis() {
    local venv="${XDG_CACHE_HOME:-$HOME/.cache}/svc-tools/schemathesis-4"
    if [ ! -x "$venv/bin/schemathesis" ]; then
        apt_install_missing python3 python3-venv
        echo "==> installing schemathesis into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check 'schemathesis>=4.32,<5'
    fi
    export SCHEMATHESIS="$venv/bin/schemathesis"
}

# The svc binary a benchmark runs, as an absolute path in SVC_BIN: the one SVC_BIN names, else a
# release build of this checkout.
ensure_svc_bin() {
    if [ -z "${SVC_BIN:-}" ]; then
        ensure_rust
        cargo build --release --locked -p svc-cli
        SVC_BIN="${CARGO_TARGET_DIR:-target}/release/svc"
    fi
    SVC_BIN=$(realpath "$SVC_BIN")
}

# Removes svc's host chains (a fleet's host isolation, a topology's shield or NAT exemption) whose
# rules name SUBNET, with their jumps: what a deploy set and a benchmark's cleanup, which removes
# the containers through the engine, would otherwise leave.
remove_svc_chains() {
    local subnet=$1 table hook chain
    for table in filter nat; do
        hook=INPUT
        [ "$table" = nat ] && hook=POSTROUTING
        for chain in $(iptables -w -t "$table" -S 2>/dev/null |
            awk -v s=" -s $subnet " '$1 == "-A" && $2 ~ /^SVC-/ && index($0 " ", s) {print $2}' | sort -u); do
            iptables -w -t "$table" -D "$hook" -j "$chain" 2>/dev/null || true
            iptables -w -t "$table" -F "$chain" 2>/dev/null || true
            iptables -w -t "$table" -X "$chain" 2>/dev/null || true
        done
    done
}

# Removes fleet FLEET's containers and networks (its topologies' too) from the engine
# ensure_container_engine set up in DIR: a benchmark's teardown.
remove_bench_fleet() {
    local dir=$1 fleet=$2 id net
    local -a engine=(env CONTAINERS_CONF="$dir/containers.conf" podman)
    for id in $("${engine[@]}" ps -aq --filter "label=svc.fleet=$fleet" 2>/dev/null); do
        "${engine[@]}" rm -f "$id" >/dev/null 2>&1
    done
    for net in $("${engine[@]}" network ls -q --filter "label=svc.fleet=$fleet" 2>/dev/null) "$fleet-fleet"; do
        "${engine[@]}" network rm -f "$net" >/dev/null 2>&1 || true
    done
}

# The rest of a benchmark's cleanup after remove_bench_fleet: when SUBNET is given, every
# unreachable route for it (the run's own, and the one svc holds while a fleet exists) and svc's
# host chains naming it; then the API service ensure_container_engine started in DIR, if it
# started one (by its pid, nothing else of that name).
#   release_bench_engine DIR [SUBNET]
release_bench_engine() {
    local dir=$1 subnet=${2:-}
    if [ -n "$subnet" ]; then
        while ip route del unreachable "$subnet" 2>/dev/null; do :; done
        remove_svc_chains "$subnet"
    fi
    if [ -f "$dir/podman.pid" ]; then kill "$(cat "$dir/podman.pid")" 2>/dev/null || true; fi
}
