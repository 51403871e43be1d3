#!/usr/bin/env bash
# A multi-host test bed on one machine (docs/multi-host.md): N network namespaces ("hosts")
# joined by veth pairs to a bridge that lives in a namespace of its own, so the root
# namespace's interfaces and routes are never touched. Host K is namespace ${prefix}-hK with
# eth0 = 10.77.0.(K+10)/24; the bridge is br0 in ${prefix}-br, with port hK to host K. With
# --rate R both directions of every host's link are shaped to R by tbf (no netem here: no
# added latency). Needs root and iproute2.
#
# usage: hosts.sh up N [--rate R]   make the bed (from scratch: an old one is removed first)
#        hosts.sh down              remove every namespace of the bed and its processes
#        hosts.sh status            hosts, addresses, shaping and bytes on each link
#        hosts.sh exec K CMD ...    run CMD on host K, with hostname ${prefix}-hK (own UTS)
#        hosts.sh rsh HOST CMD      Open MPI's rsh agent: run the command line CMD on HOST (a
#                                   host's name or address), as ssh would: --mca plm_rsh_agent
#        hosts.sh link K up|down    bring host K's link (the bridge side) up or down
#        hosts.sh addr K            host K's address
#        hosts.sh check             exit 0 if namespaces can be made here, else say why, exit 77
# LOOM_HOSTS_PREFIX (default "loom") names the namespaces, so that beds can coexist.
set -euo pipefail

prefix=${LOOM_HOSTS_PREFIX:-loom}
subnet=10.77.0
bridge_ns="$prefix-br"

die() {
  echo "hosts.sh: $*" >&2
  exit 2
}
host_ns() { echo "$prefix-h$1"; }
addr() { echo "$subnet.$(($1 + 10))"; }
# The hosts of this bed, by index, from the namespaces that exist.
hosts() {
  ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^$prefix-h\([0-9][0-9]*\)\$/\1/p" | sort -n
}

# tbf's bucket: 1 ms of the rate, at least 16 KiB. A message that fits the bucket leaves at the
# veth's speed after an idle moment, which no real link of that rate does: with 10 ms (the
# bucket this bed had first), 131 KB crossed a 100mbit link in 1.9 ms instead of 10.5 and a
# 1gbit link carried 4 MB at 1.3 Gbit/s; with 1 ms both keep their rate within 5 %.
burst_of() {
  local r=$1 n unit bits
  n=${r%%[a-zA-Z]*}
  unit=${r#"$n"}
  case ${unit,,} in
    gbit) bits=$((n * 1000000000)) ;;
    mbit) bits=$((n * 1000000)) ;;
    kbit) bits=$((n * 1000)) ;;
    bit | "") bits=$n ;;
    *) die "--rate $r: use a whole number with kbit, mbit or gbit, e.g. 100mbit" ;;
  esac
  local b=$((bits / 8 / 1000))
  echo $((b > 16384 ? b : 16384))
}

check() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "network namespaces need root (this is uid $(id -u))"
    return 77
  fi
  if ! command -v ip >/dev/null; then
    echo "no ip command (install iproute2)"
    return 77
  fi
  local probe="$prefix-probe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cannot make a network namespace here (ip netns add failed)"
    return 77
  fi
  ip netns delete "$probe"
}

down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(h[0-9]+|br)\$" || true); do
    # A namespace outlives `ip netns delete` while processes run in it: end them first.
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n $pids ]]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
    fi
    ip netns delete "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null || true
}

up() {
  local n=$1 rate=$2 k
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 200 ]] || die "up N: N must be a whole number in [1, 200]"
  local burst=0
  [[ -n $rate ]] && burst=$(burst_of "$rate")
  down
  ip netns add "$bridge_ns"
  ip -n "$bridge_ns" link add br0 type bridge
  ip -n "$bridge_ns" link set br0 up
  # Every host resolves every other by name and back (ip netns exec binds /etc/netns/NS/hosts
  # over /etc/hosts); the mapped IPv6 form is how c10d's dual-stack store sees its clients.
  local names="127.0.0.1 localhost"$'\n'"::1 localhost"$'\n'"::ffff:127.0.0.1 localhost"$'\n'
  for ((k = 0; k < n; k++)); do
    names+="$(addr "$k") $(host_ns "$k")"$'\n'"::ffff:$(addr "$k") $(host_ns "$k")"$'\n'
  done
  for ((k = 0; k < n; k++)); do
    local ns
    ns=$(host_ns "$k")
    ip netns add "$ns"
    mkdir -p "/etc/netns/$ns"
    printf '%s' "$names" >"/etc/netns/$ns/hosts"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name "h$k" netns "$bridge_ns"
    ip -n "$ns" addr add "$(addr "$k")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$bridge_ns" link set "h$k" master br0
    ip -n "$bridge_ns" link set "h$k" up
    if [[ -n $rate ]]; then  # out of the host, and into it
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 400ms
      ip netns exec "$bridge_ns" tc qdisc add dev "h$k" root tbf rate "$rate" burst "$burst" latency 400ms
    fi
  done
  echo "hosts.sh: $n hosts up (${rate:-unshaped}): $(for ((k = 0; k < n; k++)); do printf '%s=%s ' "$(host_ns "$k")" "$(addr "$k")"; done)"
}

status() {
  local k any=0
  for k in $(hosts); do
    any=1
    local ns tx rx q
    ns=$(host_ns "$k")
    tx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)
    rx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)
    q=$(ip netns exec "$ns" tc qdisc show dev eth0 | awk '/tbf/ {print "tbf rate " $8; exit}')
    state=$(ip -n "$bridge_ns" -br link show "h$k" 2>/dev/null | awk '{print $2}')
    printf '%s  %s  link %s  %s  tx %s B  rx %s B\n' "$ns" "$(addr "$k")" "${state:-missing}" \
      "${q:-unshaped}" "$tx" "$rx"
  done
  [[ $any -eq 1 ]] || echo "hosts.sh: no hosts (prefix $prefix)"
}

cmd=${1:-}
shift || true
case $cmd in
  up)
    [[ $# -ge 1 ]] || die "usage: hosts.sh up N [--rate R]"
    n=$1
    shift
    rate=""
    while [[ $# -gt 0 ]]; do
      case $1 in
        --rate) rate=${2:?--rate needs a value, e.g. 100mbit} && shift 2 ;;
        --rate=*) rate=${1#--rate=} && shift ;;
        *) die "unknown argument $1; usage: hosts.sh up N [--rate R]" ;;
      esac
    done
    why=$(check) || die "$why"
    up "$n" "$rate"
    ;;
  down) down ;;
  status) status ;;
  check)
    why=$(check) || {
      echo "$why"
      exit 77
    }
    ;;
  exec)
    [[ $# -ge 2 ]] || die "usage: hosts.sh exec K CMD ..."
    ns=$(host_ns "$1")
    shift
    ip netns list | awk '{print $1}' | grep -qx "$ns" || die "no host $ns; make the bed with hosts.sh up N"
    # Its own UTS namespace: gethostname() says which host a rank is on, as on real machines.
    # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
    exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
    ;;
  rsh)
    [[ $# -ge 2 ]] || die "usage: hosts.sh rsh HOST CMD ..."
    h=$1
    shift
    case $h in
      "$prefix"-h[0-9]*) k=${h#"$prefix"-h} ;;
      "$subnet".*) k=$((${h##*.} - 10)) ;;
      *) die "rsh: $h is no host of this bed (prefix $prefix)" ;;
    esac
    # As ssh does: the words are one command line for a shell on the host.
    exec "$0" exec "$k" sh -c "$*"
    ;;
  link)
    [[ $# -eq 2 && ($2 == up || $2 == down) ]] || die "usage: hosts.sh link K up|down"
    ip -n "$bridge_ns" link set "h$1" "$2"
    ;;
  addr)
    [[ $# -eq 1 ]] || die "usage: hosts.sh addr K"
    addr "$1"
    ;;
  *) die "usage: hosts.sh up N [--rate R] | down | status | exec K CMD ... | link K up|down | addr K | check" ;;
esac
