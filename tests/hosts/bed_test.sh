#!/usr/bin/env bash
# The test bed itself (scripts/hosts.sh): hosts on their own addresses reach each other over
# TCP, a shaped link carries bytes at its rate, `up` again makes the bed anew, a link cut
# stops traffic, the root namespace's links and routes are untouched, and `down` (also after a
# failed run, and with processes still running in a host) leaves no namespace behind.
# usage: bed_test.sh LOOM_BINARY HOSTS_SH
set -u
# shellcheck source=tests/hosts/hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
# A TCP transfer of N KiB from host 0 to host 1's port 5001; prints the seconds it took.
transfer() {
  local kib=$1
  on 1 python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.11", 5001)); s.listen(1); s.settimeout(10)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 16)
    if not b: break
    n += len(b)
print(n, file=sys.stderr)' 2>"$tmp/received" &
  local server=$!
  sleep 0.5
  on 0 python3 -c '
import socket, sys, time
c = socket.create_connection(("10.77.0.11", 5001), timeout=3)
t = time.time(); c.sendall(b"x" * ('"$kib"' << 10)); c.shutdown(socket.SHUT_WR); c.recv(1)
print(f"{time.time() - t:.3f}")'
  wait "$server"
}

before="$(ip -br link; ip route)"
bash "$hosts_sh" up 3 --rate 100mbit >"$tmp/stdout" 2>"$tmp/stderr" || fail "up 3 --rate 100mbit"
hosts=$(ip netns list | awk '{print $1}' | grep -c "^$LOOM_HOSTS_PREFIX-")
if [[ $hosts -eq 4 ]] && [[ $(on 2 hostname) == "$LOOM_HOSTS_PREFIX-h2" ]] &&
  on 2 ip -br addr show eth0 | grep -q 10.77.0.12/24; then
  ok "3 hosts and a bridge namespace; host 2 is $LOOM_HOSTS_PREFIX-h2 at 10.77.0.12"
else
  fail "up 3: $hosts namespaces"
fi
if [[ "$(ip -br link; ip route)" == "$before" ]]; then
  ok "the root namespace's links and routes are untouched"
else
  fail "the root namespace changed"
fi
s=$(transfer 4096)
mbit=$(awk -v s="$s" 'BEGIN {printf "%.0f", 4 * 8 * 1.048576 / s}')
if [[ $(cat "$tmp/received") -eq $((4 << 20)) && $mbit -ge 50 && $mbit -le 110 ]]; then
  ok "4 MiB over the 100mbit link in $s s: $mbit Mbit/s"
else
  fail "shaped transfer: $s s ($mbit Mbit/s), received $(cat "$tmp/received")"
fi
# A message after an idle link keeps the rate too (a pipeline's activations): tbf's bucket
# must not let it leave at the veth's speed.
s=$(transfer 128)
mbit=$(awk -v s="$s" 'BEGIN {printf "%.0f", 128 * 8 * 1.024 / 1000 / s}')
if [[ $(cat "$tmp/received") -eq $((128 << 10)) && $mbit -le 110 ]]; then
  ok "128 KiB after an idle link in $s s: $mbit Mbit/s"
else
  fail "128 KiB after an idle link in $s s: $mbit Mbit/s (the bucket lets bursts through)"
fi
bash "$hosts_sh" status >"$tmp/stdout"
if [[ $(grep -c "tbf rate 100Mbit" "$tmp/stdout") -eq 3 ]]; then
  ok "status: $(head -1 "$tmp/stdout")"
else
  fail "status: $(cat "$tmp/stdout")"
fi

bash "$hosts_sh" up 2 >/dev/null || fail "up 2"
hosts=$(ip netns list | awk '{print $1}' | grep -c "^$LOOM_HOSTS_PREFIX-")
s=$(transfer 16384)
if [[ $hosts -eq 3 && $(cat "$tmp/received") -eq $((16 << 20)) ]]; then
  ok "up 2 again: the bed made anew, 2 hosts, unshaped: 16 MiB in $s s"
else
  fail "up again: $hosts namespaces, received $(cat "$tmp/received")"
fi

bash "$hosts_sh" link 1 down
if on 0 python3 -c 'import socket; socket.create_connection(("10.77.0.11", 22), timeout=2)' 2>"$tmp/stderr"; then
  fail "host 1 still reachable with its link down"
else
  ok "link 1 down: host 1 unreachable ($(tail -1 "$tmp/stderr"))"
fi

# A failed run with a process left in a host: its trap's `down` still removes everything.
bash -c 'trap "bash \"$1\" down" EXIT; bash "$1" up 2 >/dev/null; bash "$1" exec 1 sleep 600 & sleep 1; exit 3' _ "$hosts_sh" 2>/dev/null
left=$(ip netns list | awk '{print $1}' | grep "^$LOOM_HOSTS_PREFIX-")
if [[ -z $left && ! -e /etc/netns/$LOOM_HOSTS_PREFIX-h0 ]] && ! pgrep -f "sleep 600" >/dev/null; then
  ok "a failed run's trap: no namespace, hosts file or process left"
else
  fail "left behind: ${left:-processes}"
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
