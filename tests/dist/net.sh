#!/usr/bin/env bash
# The distributed tests (test_dist) over the transports machines use
# between them (docs/distributed.md, "Launching"), each bounded by timeout:
#   net.sh MPIRUN BINDIR tcp    mpirun -np 2 over TCP instead of shared memory (--mca btl self,tcp)
#   net.sh MPIRUN BINDIR netns  two "hosts" on this machine: two network namespaces joined by a veth
#                               pair, one rank in each, launched with a host file; Open MPI starts the
#                               remote rank through an rsh agent that enters the other namespace, and
#                               both its control and data traffic are held to the veth subnet (as root;
#                               skipped with a message where namespaces cannot be made)
#   net.sh MPIRUN BINDIR np8    the seed's world of 8 (-np 8 --oversubscribe, one thread each): the
#                               collectives and the 8-rank training against one process
set -euo pipefail
mpirun=$1 bin=$2 mode=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_NUM_THREADS=1
fwd=(-x KILN_TEST_WORLD -x KILN_CACHE_DIR -x KILN_NUM_THREADS)
if [ -n "${ASAN_OPTIONS:-}" ]; then
  # the sanitizer suite: Open MPI leaks its own state at MPI_Finalize (run.sh)
  export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
  fwd+=(-x ASAN_OPTIONS)
fi
[ -n "${UBSAN_OPTIONS:-}" ] && fwd+=(-x UBSAN_OPTIONS)
case $mode in
  tcp)
    export KILN_TEST_WORLD=2
    exec timeout 300 "$mpirun" --oversubscribe -np 2 --mca btl self,tcp "${fwd[@]}" "$bin/test_dist" ;;
  np8)
    export KILN_TEST_WORLD=8
    exec timeout 600 "$mpirun" --oversubscribe -np 8 --mca btl self,vader "${fwd[@]}" "$bin/test_dist" ;;
  netns) ;;
  *) echo "net.sh: unknown mode $mode" >&2; exit 2 ;;
esac

# two namespaces, a veth pair between them: 10.77.0.1 (a) and 10.77.0.2 (b)
a=kn$$a b=kn$$b tmp=$(mktemp -d)
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
if ! { ip netns add "$a" && ip netns add "$b"; } 2>"$tmp/why"; then
  echo "SKIP: cannot make network namespaces here (needs root and ip netns): $(cat "$tmp/why")"
  exit 0
fi
ip link add "${a}v" type veth peer name "${b}v"
ip link set "${a}v" netns "$a"
ip link set "${b}v" netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev "${a}v"
ip -n "$b" addr add 10.77.0.2/24 dev "${b}v"
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${ns}v" up
done
# Open MPI's rsh agent: "rsh HOST COMMAND..." runs COMMAND in that host's
# namespace, with its own host name (a UTS namespace), as ssh would on
# another machine
cat >"$tmp/rsh" <<EOS
#!/bin/sh
host=\$1; shift
case \$host in
  10.77.0.1) ns=$a ;;
  10.77.0.2) ns=$b ;;
  *) echo "rsh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns; \$*"
EOS
chmod +x "$tmp/rsh"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$tmp/hosts"
cat >"$tmp/rank" <<EOS
#!/bin/sh
# each rank says where it runs, then runs the test
echo "rank \$OMPI_COMM_WORLD_RANK on host \$(hostname) at \$(ip -br addr show | awk '\$1 != "lo" {print \$3}')"
exec "$bin/test_dist"
EOS
chmod +x "$tmp/rank"
export KILN_TEST_WORLD=2
rc=0
timeout 300 ip netns exec "$a" unshare --uts sh -c "hostname $a; exec \"\$0\" \"\$@\"" "$mpirun" -np 2 \
  --hostfile "$tmp/hosts" --mca plm_rsh_agent "$tmp/rsh" --mca btl self,tcp \
  --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 "${fwd[@]}" "$tmp/rank" \
  >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[ "$rc" = 0 ] || { echo "FAIL: mpirun across the namespaces exited with $rc"; exit 1; }
# one rank in each namespace, and the ranks' bytes went over the veth pair
grep -q "^rank 0 on host $a at 10.77.0.1/24" "$tmp/out" || { echo "FAIL: rank 0 is not in $a"; exit 1; }
grep -q "^rank 1 on host $b at 10.77.0.2/24" "$tmp/out" || { echo "FAIL: rank 1 is not in $b"; exit 1; }
tx=$(ip -n "$b" -s -j link show "${b}v" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])')
echo "bytes sent by rank 1's host over the veth: $tx"
# the namespaces have no other link (only lo and the veth end): the TCP
# transport's bytes (about 22 KB for this run: keys, collectives, the
# training) can only have crossed the pair; fewer than 10 KB means they did not
[ "$tx" -gt 10000 ] || { echo "FAIL: only $tx bytes crossed the veth pair"; exit 1; }
