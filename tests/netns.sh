# netns.sh — two "hosts" made of network namespaces, for tests/test_multihost.sh and
# bench/bench_multihost.sh (docs/multihost.md). Source it; needs root, ip (iproute2), unshare.
#
#   netns_up DIR   namespaces NSA / NSB joined by a veth "bm0" (10.77.0.1/24, 10.77.0.2/24: the
#                  addresses exist inside these namespaces only, neither has any other route),
#                  DIR/launch.sh (OpenMPI's rsh agent: "launch.sh HOST CMD..." runs CMD in HOST's
#                  namespace under HOST's name instead of over ssh) and DIR/hosts (bmhost-a and
#                  bmhost-b, 2 slots each). Returns 0; 2 when this machine cannot make namespaces
#                  (why in NETNS_WHY); 1 when the link could not be set up (why in NETNS_WHY).
#                  Installs an EXIT trap that calls netns_down.
#   netns_down     kills what still runs inside the namespaces and removes them (idempotent).
#   mh ARGS...     mpirun started on bmhost-a, 4 ranks over the hostfile, TCP on the veth only,
#                  60 s at most.

NETS=()
NETNS_WHY=
netns_down() {
    local ns p
    for ns in "${NETS[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    NETS=()
}

netns_up() {
    NETNS_DIR=$1
    if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
        NETNS_WHY="needs root, ip (iproute2) and unshare to make network namespaces"; return 2
    fi
    # Names unique to this run; the addresses can be fixed since they live inside these
    # namespaces only.
    NSA=bmmh$$a NSB=bmmh$$b
    trap netns_down EXIT
    trap 'exit 1' INT TERM
    local ns
    for ns in $NSA $NSB; do
        if ! ip netns add "$ns" 2>"$NETNS_DIR/netns.err"; then
            NETNS_WHY="cannot make network namespaces ($(head -1 "$NETNS_DIR/netns.err"))"; return 2
        fi
        NETS+=("$ns")
        # `ip netns add` can half-work (e.g. in a chroot whose / is no mount point, it says
        # "mount --make-rslave / failed" and returns 0): a namespace we cannot enter is none
        if ! ip netns exec "$ns" true 2>"$NETNS_DIR/netns.err"; then
            NETNS_WHY="cannot enter network namespace $ns ($(head -1 "$NETNS_DIR/netns.err"))"; return 2
        fi
    done
    if ! ip link add bm0 netns $NSA type veth peer name bm0 netns $NSB 2>"$NETNS_DIR/netns.err" ||
       ! ip -n $NSA addr add 10.77.0.1/24 dev bm0 || ! ip -n $NSB addr add 10.77.0.2/24 dev bm0; then
        NETNS_WHY="veth: $(head -1 "$NETNS_DIR/netns.err")"; return 1
    fi
    for ns in $NSA $NSB; do
        if ! ip -n "$ns" link set lo up || ! ip -n "$ns" link set bm0 up; then NETNS_WHY="link up in $ns"; return 1; fi
        # A dead link is noticed after about 3 s of unanswered retransmissions (default 15 tries,
        # many minutes); the setting is per network namespace, so only these ones change.
        if ! ip netns exec "$ns" sh -c 'echo 3 >/proc/sys/net/ipv4/tcp_retries2'; then
            NETNS_WHY="tcp_retries2 in $ns"; return 1
        fi
    done
    cat >"$NETNS_DIR/launch.sh" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
    bmhost-a) ns=$NSA ;;
    bmhost-b) ns=$NSB ;;
    *) echo "launch.sh: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec \$ns unshare --uts sh -c "hostname \$host && \$*"
EOF
    chmod +x "$NETNS_DIR/launch.sh"
    printf 'bmhost-a slots=2\nbmhost-b slots=2\n' >"$NETNS_DIR/hosts"
    return 0
}

mh() {
    timeout 60 ip netns exec $NSA mpirun --hostfile "$NETNS_DIR/hosts" -np 4 --map-by slot \
        --mca plm_rsh_agent "$NETNS_DIR/launch.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca pml ob1 --mca btl tcp,vader,self \
        --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
        --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 \
        -x OPENBLAS_NUM_THREADS -x ASAN_OPTIONS "$@"
}
