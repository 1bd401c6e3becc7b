#!/bin/bash
# haproxy-readers.sh [CONFIG]: EXAMPLE failoverd command hook that keeps an
# HAProxy reader backend serving exactly the group's reader set, through
# HAProxy's runtime API (the stats socket). hooks/scripts_test.go runs it
# against a stand-in runtime API that records the commands, and test/e2e
# against Debian's haproxy (TestHAProxyReadersHookSetsARealHAProxysServerStates,
# and from a real daemon on a flapping replica); try it on a staging
# HAProxy first.
#
# Configure it in failoverd.yaml, per group (readers.enabled: true):
#   hooks:
#     - name: haproxy-readers
#       events: [reader-added, reader-removed]
#       command: ["/usr/local/lib/failoverd/haproxy-readers.sh", "/etc/failoverd/haproxy-readers-orders.conf"]
#       timeout: 10s
# failoverd runs it once per event (no retries) with the event's JSON on
# stdin and FAILOVERD_EVENT, FAILOVERD_GROUP, FAILOVERD_EPOCH, FAILOVERD_SITE
# (the site that joined or left) and FAILOVERD_READERS (the FULL reader set
# after the change, comma-separated, empty when there is none) in the
# environment. Because every run applies the full set, a run that failed is
# made good by the next event.
#
# Settings, from the environment or from CONFIG, a file of KEY=VALUE lines
# (# comments; CONFIG wins; the file is parsed, never sourced):
#   HAPROXY_SOCKET    required: the runtime API address, a unix socket path
#                     (needs socat) or HOST:PORT (`stats socket
#                     ipv4@127.0.0.1:9999 level admin`)
#   HAPROXY_BACKEND   required: the reader backend
#   HAPROXY_SERVERS   required: every site that may serve reads -> its
#                     server name in that backend, "site1=db1 site2=db2" (a
#                     bare "site1" means the server has the site's name)
#   HAPROXY_SHUTDOWN_SESSIONS  1: also close the sessions still open to the
#                     servers taken out, so no client keeps reading from a
#                     replica that fell behind (default 0)
#   HAPROXY_TRANSPORT socat or devtcp (bash's /dev/tcp, TCP only); default
#                     socat when installed, else devtcp
#
# What it does on reader-added and reader-removed (other events are
# ignored): `set server BACKEND/SERVER state maint` for every mapped site
# NOT in the set first (a lagging or broken replica leaves before anything
# joins), then `state ready` for every mapped site in the set, one command
# per connection, each answer checked (HAProxy answers an empty line on
# success and an error text otherwise). `ready` still lets HAProxy's own
# health checks (`option httpchk GET /health?role=replica`) mark a server
# down; `maint` overrides them. A reader that is not in HAPROXY_SERVERS is
# reported (exit 1) after the mapped servers are set.
set -Eeuo pipefail

die() { echo "haproxy-readers-hook: $*" >&2; exit 1; }

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
if [[ $event != reader-added && $event != reader-removed ]]; then
	echo "haproxy-readers-hook: nothing to do on ${event:-an unnamed event}"
	exit 0
fi
socket=${HAPROXY_SOCKET:-}
backend=${HAPROXY_BACKEND:-}
[[ -n $socket ]] || die "HAPROXY_SOCKET is empty: set the runtime API socket path or HOST:PORT"
[[ -n $backend ]] || die "HAPROXY_BACKEND is empty: name the reader backend"
[[ -n ${HAPROXY_SERVERS:-} ]] || die "HAPROXY_SERVERS is empty: map every reader site, e.g. \"site1=db1 site2=db2\""

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
	echo "haproxy-readers-hook: $1"
}

declare -A is_reader=()
for site in ${FAILOVERD_READERS//,/ }; do
	[[ $site =~ $name_re ]] || die "FAILOVERD_READERS entry ${site@Q} is not a site name"
	is_reader[$site]=1
done

declare -A mapped=()
in=() out=()
for entry in ${HAPROXY_SERVERS//,/ }; do
	site=${entry%%=*}
	server=${entry#*=}
	[[ $site =~ $name_re && $server =~ $name_re ]] || die "HAPROXY_SERVERS entry ${entry@Q} is not SITE=SERVER"
	mapped[$site]=1
	if [[ -n ${is_reader[$site]:-} ]]; then
		in+=("$server")
	else
		out+=("$server")
	fi
done

echo "haproxy-readers-hook: group ${FAILOVERD_GROUP:-?} epoch ${FAILOVERD_EPOCH:-?} $event ${FAILOVERD_SITE:-?}: backend $backend serves [${FAILOVERD_READERS:-}]"
for server in "${out[@]}"; do
	send "set server $backend/$server state maint"
	if [[ ${HAPROXY_SHUTDOWN_SESSIONS:-0} == 1 ]]; then
		send "shutdown sessions server $backend/$server"
	fi
done
for server in "${in[@]}"; do
	send "set server $backend/$server state ready"
done
for site in "${!is_reader[@]}"; do
	[[ -n ${mapped[$site]:-} ]] || die "reader $site is not in HAPROXY_SERVERS: it serves no reads through $backend"
done
