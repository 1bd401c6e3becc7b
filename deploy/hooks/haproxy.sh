#!/bin/bash
# haproxy.sh [CONFIG]: EXAMPLE failoverd command hook that points an HAProxy
# backend at the new primary after a failover or switchover, through
# HAProxy's runtime API (the stats socket). hooks/scripts_test.go runs it
# against a stand-in runtime API that records the commands; try it on a
# staging HAProxy first.
#
# Configure it in failoverd.yaml, per group:
#   hooks:
#     - name: haproxy
#       events: [after-promote]
#       command: ["/usr/local/lib/failoverd/haproxy.sh", "/etc/failoverd/haproxy-orders.conf"]
#       timeout: 10s
# failoverd runs it once per event (no retries) with the event's JSON on stdin
# and FAILOVERD_EVENT, FAILOVERD_GROUP, FAILOVERD_EPOCH, FAILOVERD_FROM,
# FAILOVERD_TO, FAILOVERD_REASON, ... in the environment; it logs every
# output line and kills the script's process group at the timeout. The
# promotion never waits for it: a failure shows in status and metrics.
#
# Settings, from the environment (e.g. the systemd unit's EnvironmentFile)
# or from CONFIG, a file of KEY=VALUE lines (# comments; CONFIG wins; the
# file is parsed, never sourced):
#   HAPROXY_SOCKET    required: the runtime API address, a unix socket path
#                     (/run/haproxy/admin.sock, needs socat) or HOST:PORT
#                     (`stats socket ipv4@127.0.0.1:9999 level admin`)
#   HAPROXY_BACKEND   required: the backend that must hold only the primary
#   HAPROXY_SERVERS   required: every site of the group -> its server name in
#                     that backend, "site0=db0 site1=db1 site2=db2" (a bare
#                     "site0" means the server has the site's name)
#   HAPROXY_SHUTDOWN_SESSIONS  1: also close the sessions still open to the
#                     demoted servers, so clients reconnect to the primary
#                     (default 0: they end by themselves)
#   HAPROXY_TRANSPORT socat or devtcp (bash's /dev/tcp, TCP only); default
#                     socat when installed, else devtcp
#
# What it assumes: the socket has `level admin`; the backend lists one server
# per site and is meant to send traffic to exactly one of them (the writer).
#
# What it does on after-promote (other events are ignored): `set server
# BACKEND/SERVER state maint` for every other site first (never two writers
# in the backend), then `set server BACKEND/SERVER state ready` for the new
# primary, one command per connection, each answer checked (HAProxy answers
# an empty line on success and an error text otherwise).
set -Eeuo pipefail

die() { echo "haproxy-hook: $*" >&2; exit 1; }

if [[ $# -gt 1 ]]; then
	die "usage: $0 [CONFIG]"
fi
if [[ $# -eq 1 ]]; then
	[[ -r $1 ]] || die "cannot read config file $1"
	while IFS= read -r line || [[ -n $line ]]; do
		line=${line%%#*}
		line=${line#"${line%%[![:space:]]*}"}
		line=${line%"${line##*[![:space:]]}"}
		[[ -z $line ]] && continue
		key=${line%%=*}
		value=${line#*=}
		case $key in
		HAPROXY_SOCKET | HAPROXY_BACKEND | HAPROXY_SERVERS | HAPROXY_SHUTDOWN_SESSIONS | HAPROXY_TRANSPORT)
			printf -v "$key" '%s' "$value"
			;;
		*) die "$1: unknown setting ${key@Q}" ;;
		esac
	done <"$1"
fi

event=${FAILOVERD_EVENT:-}
if [[ $event != after-promote ]]; then
	echo "haproxy-hook: nothing to do on ${event:-an unnamed event}"
	exit 0
fi
to=${FAILOVERD_TO:-}
[[ -n $to ]] || die "FAILOVERD_TO is empty: no new primary to route to"
socket=${HAPROXY_SOCKET:-}
backend=${HAPROXY_BACKEND:-}
[[ -n $socket ]] || die "HAPROXY_SOCKET is empty: set the runtime API socket path or HOST:PORT"
[[ -n $backend ]] || die "HAPROXY_BACKEND is empty"
[[ -n ${HAPROXY_SERVERS:-} ]] || die "HAPROXY_SERVERS is empty: map every site, e.g. \"site0=db0 site1=db1\""

# A name with a space or a semicolon would split into further commands.
name_re='^[A-Za-z0-9._:-]+$'
[[ $backend =~ $name_re ]] || die "HAPROXY_BACKEND ${backend@Q} is not a plain name"

transport=${HAPROXY_TRANSPORT:-}
if [[ -z $transport ]]; then
	if command -v socat >/dev/null; then transport=socat; else transport=devtcp; fi
fi
[[ $transport == socat || $transport == devtcp ]] || die "HAPROXY_TRANSPORT ${transport@Q}: use socat or devtcp"
if [[ $socket == /* ]]; then
	[[ $transport == socat ]] || die "a unix socket ($socket) needs socat"
	socat_addr="UNIX-CONNECT:$socket"
else
	port=${socket##*:}
	host=${socket%:*}
	[[ -n $host && $port =~ ^[0-9]+$ && $socket == *:* ]] || die "HAPROXY_SOCKET ${socket@Q} is neither a path nor HOST:PORT"
	socat_addr="TCP:$socket"
fi

# send CMD: runs one runtime API command and fails on any answer but an
# empty one.
send() {
	local answer fd
	if [[ $transport == socat ]]; then
		answer=$(printf '%s\n' "$1" | socat -t 5 -T 10 - "$socat_addr") ||
			die "runtime API $socket: cannot send '$1'"
	else
		exec {fd}<>"/dev/tcp/$host/$port" || die "runtime API $socket: cannot connect"
		printf '%s\n' "$1" >&"$fd" || die "runtime API $socket: cannot send '$1'"
		answer=$(cat <&"$fd") || die "runtime API $socket: no answer to '$1'"
		exec {fd}>&-
	fi
	answer=${answer//$'\n'/ }
	answer=${answer#"${answer%%[![:space:]]*}"}
	answer=${answer%"${answer##*[![:space:]]}"}
	[[ -z $answer ]] || die "runtime API $socket refused '$1': $answer"
	echo "haproxy-hook: $1"
}

new_server=""
others=()
for entry in ${HAPROXY_SERVERS//,/ }; do
	site=${entry%%=*}
	server=${entry#*=}
	[[ $site =~ $name_re && $server =~ $name_re ]] || die "HAPROXY_SERVERS entry ${entry@Q} is not SITE=SERVER"
	if [[ $site == "$to" ]]; then
		new_server=$server
	else
		others+=("$server")
	fi
done
[[ -n $new_server ]] || die "new primary $to is not in HAPROXY_SERVERS"

echo "haproxy-hook: group ${FAILOVERD_GROUP:-?} epoch ${FAILOVERD_EPOCH:-?}: backend $backend -> $to ($new_server)"
for server in "${others[@]}"; do
	send "set server $backend/$server state maint"
	if [[ ${HAPROXY_SHUTDOWN_SESSIONS:-0} == 1 ]]; then
		send "shutdown sessions server $backend/$server"
	fi
done
send "set server $backend/$new_server state ready"
