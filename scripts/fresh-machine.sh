#!/usr/bin/env bash
# fresh-machine.sh — the README's two commands on a new, minimal Debian 12, exactly as written.
#
# Builds a minimal Debian 12 (bookworm) root with debootstrap (variant minbase, plus only git and
# make), clones this repository's committed HEAD into it, and runs there, one after the other:
#     make deps run
#     make deps test
# printing each command's wall time and exit status and the test suite's last line. Not run by
# CI: it needs a few minutes, root, and the Debian mirror this machine's apt already uses (read
# from /etc/apt; nothing else is contacted). With --as-user the two commands run as a normal
# user "dev" with sudo (installed for it), as a developer without root would run them.
#
#   sudo bash scripts/fresh-machine.sh [--as-user] [--keep] [--root DIR]
#
# The root lives in DIR (default: a new directory under /var/tmp) and is removed afterwards
# unless --keep; the full logs are DIR.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
as_user=0 keep=0 root=""
while [ $# -gt 0 ]; do
    case $1 in
        --as-user) as_user=1 ;;
        --keep) keep=1 ;;
        --root) root=$2; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "fresh-machine.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "fresh-machine.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-machine.sh: installing debootstrap"; apt-get install -y debootstrap >/dev/null; }

# the mirror apt already uses on this machine (deb822 or one-line sources)
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 || true)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || { echo "fresh-machine.sh: no Debian mirror found in /etc/apt" >&2; exit 1; }

[ -n "$root" ] || root=$(mktemp -d /var/tmp/bigmac-fresh.XXXXXX)
log=$root.log
: >"$log"
mounted=()
cleanup() {
    # everything mounted under the root, ours and what its tests left (e.g. /run/netns), deepest first
    awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null || true; done
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
    if [ "$keep" = 0 ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT

stamp() { date +%s; }
t0=$(stamp)
echo "== debootstrap bookworm (minbase + git make) into $root"
debootstrap --variant=minbase --include=git,make,ca-certificates bookworm "$root" "$mirror" >>"$log" 2>&1 ||
    { echo "debootstrap failed; see $log"; tail -5 "$log"; exit 1; }
echo "   $(( $(stamp) - t0 )) s"
cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev dev/pts; do
    mount --bind "/$m" "$root/$m"; mounted+=("$root/$m")
done
mount -t tmpfs tmpfs "$root/dev/shm" 2>/dev/null && mounted+=("$root/dev/shm") || true

home=/root
run_in() { env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=$home TERM=dumb \
               LANG=C.UTF-8 chroot "$root" "$@"; }
if [ "$as_user" = 1 ]; then
    run_in apt-get install -y sudo >>"$log" 2>&1
    run_in useradd -m -s /bin/bash dev
    echo 'dev ALL=(ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/dev"
    home=/home/dev
fi
# a clean clone of the committed HEAD
git clone -q --no-local "$repo" "$root$home/bigmac"
[ "$as_user" = 1 ] && run_in chown -R dev:dev "$home/bigmac" 2>/dev/null || true
echo "   clone: $(git -c safe.directory="*" -C "$root$home/bigmac" log --oneline -1)"
echo "   packages in the root before: $(run_in dpkg-query -W -f='.\n' | wc -l)"

status=0
for cmd in "make deps run" "make deps test"; do
    echo "== $cmd   (as $([ "$as_user" = 1 ] && echo dev || echo root), in $home/bigmac)"
    t=$(stamp)
    set +e
    if [ "$as_user" = 1 ]; then
        run_in su - dev -c "cd $home/bigmac && $cmd" >>"$log" 2>&1
    else
        run_in bash -c "cd $home/bigmac && $cmd" >>"$log" 2>&1
    fi
    rc=$?
    set -e
    echo "   exit $rc, $(( $(stamp) - t )) s"
    [ "$rc" = 0 ] || status=1
done
echo "== last lines of the log ($log)"
grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1 | sed 's/^/   tests: /' || true
grep -E '^bubble ratio:|^note:' "$log" | sed 's/^/   demo: /' || true
echo "   total $(( $(stamp) - t0 )) s"
exit $status
