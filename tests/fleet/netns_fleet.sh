#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fleet test as hosts: a Redis "host" and four node "hosts", each a network namespace of its
# own joined to the Redis host by a veth pair whose ends delay every packet (tc netem, 1 ms each
# way: a datacenter hop; undelayed, and said, where the kernel has no netem). Four node processes per host, each with its own empty disk, ask for
# the same 32 kernels at once: exactly 32 compiles across the fleet. Traffic stays inside the
# namespaces made here. Then a blackholed address: a route from a node host into its link where no
# one answers, so a connect never completes; `kcache remote ping` must give up by its connect
# timeout, and so must it for a name whose name server is blackholed. Usage: netns_fleet.sh KCACHE_FLEET_BINARY KCACHE_BINARY. Exit 77 (skipped) unless run
# as root with `ip netns`, `tc` and redis-server.
set -uo pipefail
FLEET=$1
KCACHE=$2
HOSTS=4 PER_HOST=4 KERNELS=32
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root"
command -v ip >/dev/null && command -v tc >/dev/null || skip "no ip or tc"
command -v redis-server >/dev/null || skip "no redis-server"
TAG="kcf$$"
WORK=$(mktemp -d)
cleanup() {
  [ -n "${REDIS:-}" ] && kill -9 "$REDIS" 2>/dev/null
  for h in $(seq 0 $HOSTS); do ip netns del "$TAG-$h" 2>/dev/null; done
  rm -rf "$WORK" "/etc/netns/$TAG-1"
}
trap cleanup EXIT
ip netns add "$TAG-0" 2>/dev/null || skip "cannot make network namespaces here"
ip -n "$TAG-0" link set lo up
for h in $(seq 1 $HOSTS); do
  ip netns add "$TAG-$h"
  ip -n "$TAG-$h" link set lo up
  ip link add "$TAG-r$h" netns "$TAG-0" type veth peer name "$TAG-n$h" netns "$TAG-$h"
  ip -n "$TAG-0" addr add "10.77.$h.1/24" dev "$TAG-r$h"
  ip -n "$TAG-$h" addr add "10.77.$h.2/24" dev "$TAG-n$h"
  ip -n "$TAG-0" link set "$TAG-r$h" up
  ip -n "$TAG-$h" link set "$TAG-n$h" up
  # Without the netem module (a container's kernel may lack it) the hosts are joined undelayed.
  if tc -n "$TAG-$h" qdisc add dev "$TAG-n$h" root netem delay 1ms 2>/dev/null &&
    tc -n "$TAG-0" qdisc add dev "$TAG-r$h" root netem delay 1ms 2>/dev/null; then
    DELAY="1 ms each way to Redis"
  else
    DELAY="no delay (this kernel has no netem)"
  fi
done
ip netns exec "$TAG-0" redis-server --bind 0.0.0.0 --port 6379 --protected-mode no --save '' \
  --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
REDIS=$!
for _ in $(seq 100); do
  ip netns exec "$TAG-1" bash -c "exec 3<>/dev/tcp/10.77.1.1/6379" 2>/dev/null && break
  sleep 0.05
done
GATE="$WORK/gate"
pids=()
for h in $(seq 1 $HOSTS); do
  for p in $(seq 1 $PER_HOST); do
    ip netns exec "$TAG-$h" "$FLEET" node "$WORK/h$h-p$p" "redis://10.77.$h.1:6379" $KERNELS 10000 \
      "$GATE" >"$WORK/h$h-p$p.out" 2>"$WORK/h$h-p$p.err" &
    pids+=($!)
  done
done
start=$(date +%s%N)
touch "$GATE"
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
ms=$(( ($(date +%s%N) - start) / 1000000 ))
compiles=0
for out in "$WORK"/h*.out; do
  line=$(cat "$out")
  grep -q "entries=$KERNELS failures=0" <<<"$line" || { echo "FAIL: $out: $line $(cat "${out%.out}.err")"; failed=1; }
  c=$(grep -o 'compiles=[0-9]*' <<<"$line" | cut -d= -f2)
  compiles=$((compiles + ${c:-0}))
done
echo "fleet over namespaces: $HOSTS hosts x $PER_HOST nodes, $DELAY, $KERNELS kernels: $compiles compiles across the fleet, $ms ms"
[ "$compiles" -eq $KERNELS ] || { echo "FAIL: $compiles compiles, expected exactly $KERNELS"; failed=1; }
# `kcache remote ping` of URL from host 1 must fail (exit 1) within 3 s, saying SAYS: a 200 ms
# connect timeout bounds it. LABEL names the case.
ping_gives_up() {
  local label=$1 url=$2 says=$3 start out rc ms
  start=$(date +%s%N)
  out=$(ip netns exec "$TAG-1" env KCACHE_DIR="$WORK/ping" \
    KCACHE_REMOTE="$url|connect-timeout=200ms" "$KCACHE" remote ping 2>&1)
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "$label: ping exit $rc after $ms ms: $out"
  [ $rc -eq 1 ] || { echo "FAIL: $label: ping exited $rc, expected 1"; failed=1; }
  [ $ms -lt 3000 ] || { echo "FAIL: $label: a 200 ms connect timeout took $ms ms"; failed=1; }
  grep -q "$says" <<<"$out" || { echo "FAIL: $label: the ping does not say '$says'"; failed=1; }
}
# The blackhole: 10.78.0.1 is routed into host 1's link, where nothing has that address.
ip -n "$TAG-1" route add 10.78.0.0/24 dev "$TAG-n1"
ping_gives_up "blackholed address" "redis://10.78.0.1:6379" "timed out"
# A name whose name server is blackholed: getaddrinfo alone would wait seconds for it (5 s a try),
# so the connect timeout bounds the name's resolution too. `ip netns exec` puts the namespace's own
# resolv.conf in place of the host's.
mkdir -p "/etc/netns/$TAG-1"
printf 'nameserver 10.78.0.53\noptions timeout:5 attempts:2\n' >"/etc/netns/$TAG-1/resolv.conf"
ping_gives_up "name server blackholed" "redis://redis.kcache-test.invalid:6379" \
  "resolving the host timed out"
[ $failed -eq 0 ] && echo PASS
exit $failed
