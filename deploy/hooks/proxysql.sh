#!/bin/bash
# proxysql.sh [CONFIG]: EXAMPLE failoverd command hook that moves the writer
# in ProxySQL to the new primary after a failover or switchover, through
# ProxySQL's admin interface. hooks/scripts_test.go runs it against a stand-in
# client that records the statements; try it on a staging ProxySQL first.
#
# Configure it in failoverd.yaml, per group:
#   hooks:
#     - name: proxysql
#       events: [after-promote]
#       command: ["/usr/local/lib/failoverd/proxysql.sh", "/etc/failoverd/proxysql-orders.conf"]
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
#   PROXYSQL_SITES            required: failoverd site name -> the MySQL
#                             host:port ProxySQL knows it by, as
#                             "site0=10.0.0.10:3306 site1=10.0.0.11:3306"
#   PROXYSQL_ADMIN            admin interface host:port (default 127.0.0.1:6032)
#   PROXYSQL_USER             admin user (default admin)
#   PROXYSQL_DEFAULTS_FILE    a my.cnf-style file with the admin password
#                             ([client] password=...), passed as
#                             --defaults-extra-file so that no password is on
#                             a command line; else PROXYSQL_PASSWORD (env
#                             only) is handed to the client as MYSQL_PWD
#   PROXYSQL_WRITER_HOSTGROUP writer hostgroup (default 10)
#   PROXYSQL_READER_HOSTGROUP reader hostgroup (default 20)
#   PROXYSQL_CLIENT           client program (default mysql, else mariadb)
#
# What it assumes:
#   - Every site's server is in mysql_servers exactly once, in the writer or
#     the reader hostgroup (mysql_servers' key is hostgroup, host, port).
#   - The two hostgroups are NOT in mysql_replication_hostgroups: there
#     ProxySQL already moves servers by their read_only, and this hook would
#     fight it (failoverd keeps every non-primary read_only, so that setup
#     needs no hook).
#
# What it does on after-promote (other events are ignored): in one admin
# session, moves every other site's server from the writer to the reader
# hostgroup, then the new primary's from the reader to the writer
# hostgroup, loads the servers to runtime and saves them to disk, then checks
# that the new primary is in the runtime writer hostgroup.
set -Eeuo pipefail

die() { echo "proxysql-hook: $*" >&2; exit 1; }

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
		PROXYSQL_SITES | PROXYSQL_ADMIN | PROXYSQL_USER | PROXYSQL_DEFAULTS_FILE | \
			PROXYSQL_WRITER_HOSTGROUP | PROXYSQL_READER_HOSTGROUP | PROXYSQL_CLIENT)
			printf -v "$key" '%s' "$value"
			;;
		*) die "$1: unknown setting ${key@Q} (PROXYSQL_PASSWORD belongs in PROXYSQL_DEFAULTS_FILE)" ;;
		esac
	done <"$1"
fi

event=${FAILOVERD_EVENT:-}
if [[ $event != after-promote ]]; then
	echo "proxysql-hook: nothing to do on ${event:-an unnamed event}"
	exit 0
fi
to=${FAILOVERD_TO:-}
[[ -n $to ]] || die "FAILOVERD_TO is empty: no new primary to route to"

admin=${PROXYSQL_ADMIN:-127.0.0.1:6032}
user=${PROXYSQL_USER:-admin}
writer=${PROXYSQL_WRITER_HOSTGROUP:-10}
reader=${PROXYSQL_READER_HOSTGROUP:-20}
[[ $writer =~ ^[0-9]+$ && $reader =~ ^[0-9]+$ && $writer != "$reader" ]] ||
	die "PROXYSQL_WRITER_HOSTGROUP ($writer) and PROXYSQL_READER_HOSTGROUP ($reader) must be two different numbers"
[[ -n ${PROXYSQL_SITES:-} ]] || die "PROXYSQL_SITES is empty: map every site, e.g. \"site0=10.0.0.10:3306 site1=10.0.0.11:3306\""

# split_addr HOST:PORT sets host and port; only plain host names and
# addresses pass, so nothing from the settings can change the SQL.
split_addr() {
	port=${1##*:}
	host=${1%:*}
	host=${host#[}
	host=${host%]}
	[[ $host =~ ^[A-Za-z0-9._:-]+$ && $port =~ ^[0-9]+$ && $1 == *:* ]] ||
		die "site address ${1@Q} is not HOST:PORT"
}

sql=""
new_host="" new_port=""
for entry in ${PROXYSQL_SITES//,/ }; do
	[[ $entry == *=* ]] || die "PROXYSQL_SITES entry ${entry@Q} is not SITE=HOST:PORT"
	site=${entry%%=*}
	split_addr "${entry#*=}"
	if [[ $site == "$to" ]]; then
		new_host=$host new_port=$port
		continue
	fi
	sql+="UPDATE mysql_servers SET hostgroup_id=$reader WHERE hostgroup_id=$writer AND hostname='$host' AND port=$port;"$'\n'
done
[[ -n $new_host ]] || die "new primary $to is not in PROXYSQL_SITES"
sql+="UPDATE mysql_servers SET hostgroup_id=$writer WHERE hostgroup_id=$reader AND hostname='$new_host' AND port=$new_port;"$'\n'
sql+="LOAD MYSQL SERVERS TO RUNTIME;"$'\n'
sql+="SAVE MYSQL SERVERS TO DISK;"$'\n'
sql+="SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id=$writer AND hostname='$new_host' AND port=$new_port;"$'\n'

client=${PROXYSQL_CLIENT:-}
if [[ -z $client ]]; then
	client=$(command -v mysql || command -v mariadb) || die "neither mysql nor mariadb client found; set PROXYSQL_CLIENT"
fi
split_addr "$admin"
args=()
if [[ -n ${PROXYSQL_DEFAULTS_FILE:-} ]]; then
	# --defaults-extra-file must come first.
	args+=("--defaults-extra-file=$PROXYSQL_DEFAULTS_FILE")
elif [[ -n ${PROXYSQL_PASSWORD:-} ]]; then
	export MYSQL_PWD=$PROXYSQL_PASSWORD
fi
args+=("--host=$host" "--port=$port" "--user=$user" --protocol=TCP --connect-timeout=5 --batch --skip-column-names)

echo "proxysql-hook: group ${FAILOVERD_GROUP:-?} epoch ${FAILOVERD_EPOCH:-?}: writer -> $to ($new_host:$new_port) via ProxySQL admin $admin"
out=$(printf '%s' "$sql" | "$client" "${args[@]}") || die "ProxySQL admin $admin refused the change (see above)"
# The new primary must be a writer at runtime now: an UPDATE that matched no
# row (the server missing from mysql_servers) would otherwise pass silently.
if [[ $out != 1 ]]; then
	die "after the change runtime_mysql_servers holds $new_host:$new_port in writer hostgroup $writer ${out:-0} times, want once: is it in mysql_servers (hostgroup $reader or $writer)?"
fi
echo "proxysql-hook: writer hostgroup $writer now holds $new_host:$new_port"
