#!/usr/bin/env bash
# Installs the strata broker on this host (or lays it out under a scratch root), per
# deploy/README.md. Safe to run again: it upgrades the binary, the unit and the tuning files
# and never overwrites an existing /etc/strata/strata.toml.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: deploy/install.sh [--prefix DIR] [--binary PATH] [--no-user] [--help]

Installs the strata broker:
  PREFIX/usr/local/bin/strata                    the binary (mode 755)
  PREFIX/etc/strata/strata.toml                  the configuration, from deploy/strata.toml,
                                                 only when absent (an existing one is kept)
  PREFIX/etc/systemd/system/strata.service       the systemd unit
  PREFIX/etc/sysctl.d/90-strata.conf             kernel settings
  PREFIX/etc/security/limits.d/90-strata.conf    memlock and open-files limits
  PREFIX/var/lib/strata                          the data directory (mode 750)
  PREFIX/var/log/strata                          for logs kept outside the journal (mode 750)
and, when installing to / as root, the system user and group `strata`
(no login shell, home /var/lib/strata), which then owns the data directory.

Options:
  --prefix DIR    lay everything out under DIR instead of / (a scratch or packaging root;
                  no user is created and nothing is chowned then)
  --binary PATH   the strata binary to install (default: target/release/strata)
  --no-user       do not create the strata user (also skipped when --prefix is not /
                  or when not running as root)
  --help          this text

It does not start anything: it prints the commands that do.
EOF
}

die() {
    printf 'install.sh: %s\n' "$*" >&2
    exit 1
}

say() { printf '%s\n' "$*"; }

deploy_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(dirname "$deploy_dir")

prefix=/
binary=target/release/strata
create_user=1

while [ $# -gt 0 ]; do
    case "$1" in
    --prefix)
        [ $# -ge 2 ] || die "--prefix needs a directory"
        prefix=$2
        shift 2
        ;;
    --prefix=*)
        prefix=${1#--prefix=}
        shift
        ;;
    --binary)
        [ $# -ge 2 ] || die "--binary needs a path"
        binary=$2
        shift 2
        ;;
    --binary=*)
        binary=${1#--binary=}
        shift
        ;;
    --no-user)
        create_user=0
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        die "unknown argument: $1"
        ;;
    esac
done

# A relative --binary is looked up from the current directory first, then from the
# repository root (so the default works from anywhere).
if [ "${binary#/}" = "$binary" ] && [ ! -e "$binary" ] && [ -e "$repo_dir/$binary" ]; then
    binary=$repo_dir/$binary
fi
[ -f "$binary" ] || die "no strata binary at $binary: build it (cargo build --release -p broker) or pass --binary PATH"
[ -x "$binary" ] || die "$binary is not executable"
version=$("$binary" --version 2>&1) || die "$binary --version failed: $version"

config_source=$deploy_dir/strata.toml
[ -f "$config_source" ] || die "missing $config_source (the reference configuration with every key and its default)"
for file in strata.service sysctl.d/90-strata.conf limits.d/90-strata.conf; do
    [ -f "$deploy_dir/$file" ] || die "missing $deploy_dir/$file"
done

# Everything is written below $root; an empty root means the real /.
[ -n "$prefix" ] || die "--prefix must not be empty"
mkdir -p "$prefix"
root=$(cd "$prefix" && pwd)
[ "$root" = / ] && root=

is_root=0
[ "$(id -u)" = 0 ] && is_root=1

# The system user: only for a real installation to / as root.
if [ "$create_user" = 1 ]; then
    if [ -n "$root" ]; then
        say "not creating the strata user: --prefix is not /"
        create_user=0
    elif [ "$is_root" = 0 ]; then
        say "not creating the strata user: not running as root"
        create_user=0
    fi
fi
if [ "$create_user" = 1 ]; then
    if getent passwd strata >/dev/null; then
        say "user strata exists"
    else
        command -v useradd >/dev/null || die "useradd not found: create the system user strata yourself, then rerun with --no-user"
        nologin=$(command -v nologin || echo /usr/sbin/nologin)
        useradd --system --user-group --home-dir /var/lib/strata --no-create-home \
            --shell "$nologin" --comment "strata broker" strata
        say "created system user strata"
    fi
fi

# Ownership is only changed in a real installation to / as root, and only when the user
# exists (created above, or by the operator).
own=0
if [ -z "$root" ] && [ "$is_root" = 1 ] && getent passwd strata >/dev/null; then
    own=1
fi

install -d -m 755 "$root/usr/local/bin" "$root/etc/strata" "$root/etc/systemd/system" \
    "$root/etc/sysctl.d" "$root/etc/security/limits.d"

# The binary: replaced on every run (install unlinks the old file first, so a running
# broker keeps its copy until it is restarted).
install -m 755 "$binary" "$root/usr/local/bin/strata"
say "installed $root/usr/local/bin/strata ($version)"

# The configuration: the operator's file is never overwritten.
config=$root/etc/strata/strata.toml
if [ -e "$config" ]; then
    say "kept existing $config (the shipped defaults are in $config_source)"
else
    install -m 640 "$config_source" "$config"
    say "installed $config"
fi
if [ "$own" = 1 ]; then
    # root owns it; the broker (group strata) may read it but not change it.
    chown root:strata "$config"
fi

install -m 644 "$deploy_dir/strata.service" "$root/etc/systemd/system/strata.service"
install -m 644 "$deploy_dir/sysctl.d/90-strata.conf" "$root/etc/sysctl.d/90-strata.conf"
install -m 644 "$deploy_dir/limits.d/90-strata.conf" "$root/etc/security/limits.d/90-strata.conf"
say "installed $root/etc/systemd/system/strata.service, $root/etc/sysctl.d/90-strata.conf, $root/etc/security/limits.d/90-strata.conf"

for dir in "$root/var/lib/strata" "$root/var/log/strata"; do
    install -d -m 750 "$dir"
    chmod 750 "$dir"
    if [ "$own" = 1 ]; then
        chown strata:strata "$dir"
    fi
done
say "data directory $root/var/lib/strata"

if [ -z "$root" ] && [ "$own" = 0 ]; then
    say "note: user strata does not exist; create it, then: chown strata:strata /var/lib/strata /var/log/strata && chgrp strata /etc/strata/strata.toml"
fi

cat <<EOF

Next steps:
  edit /etc/strata/strata.toml           (at least node.id, advertised.listeners, log.dirs)
  systemctl daemon-reload
  sysctl --system
  strata doctor --config /etc/strata/strata.toml
  systemctl enable --now strata
  journalctl -u strata -f                (wait for "ready")
EOF
if [ -n "$root" ]; then
    say "(files were laid out under $root, not installed on this host)"
fi
