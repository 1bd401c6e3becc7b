#!/bin/bash
# proxysql-readers.sh [CONFIG]: EXAMPLE failoverd command hook that keeps a
# ProxySQL reader hostgroup serving exactly the group's reader set, through
# ProxySQL's admin interface. hooks/scripts_test.go runs it against a
# stand-in client that records the statements (Debian has no ProxySQL
# package, so no test runs a real one); try it on a staging ProxySQL
# first.
#
# Configure it in failoverd.yaml, per group (readers.enabled: true):
#   hooks:
#     - name: proxysql-readers
#       events: [reader-added, reader-removed]
#       command: ["/usr/local/lib/failoverd/proxysql-readers.sh", "/etc/failoverd/proxysql-readers-orders.conf"]
#       timeout: 10s
# failoverd runs it once per event (no retries) with the event's JSON on
# stdin and FAILOVERD_EVENT, FAILOVERD_GROUP, FAILOVERD_EPOCH, FAILOVERD_SITE
# (the site that joined or left) and FAILOVERD_READERS (the FULL reader set
# after the change, comma-separated, empty when there is none) in the
# environment. Every run applies the full set, so the next event makes good
# a run that failed.
#
# Settings, from the environment or from CONFIG, a file of KEY=VALUE lines
# (# comments; CONFIG wins; the file is parsed, never sourced):
#   PROXYSQL_SITES            required: every site that may serve reads ->
#                             the MySQL host:port ProxySQL knows it by, as
#                             "site1=10.0.0.11:3306 site2=10.0.0.12:3306"
#   PROXYSQL_READ_HOSTGROUP   the hostgroup the read query rules route to
#                             (default 30)
#   PROXYSQL_ADMIN            admin interface host:port (default 127.0.0.1:6032)
#   PROXYSQL_USER             admin user (default admin)
#   PROXYSQL_DEFAULTS_FILE    a my.cnf-style file with the admin password,
#                             passed as --defaults-extra-file; else
#                             PROXYSQL_PASSWORD (env only) as MYSQL_PWD
#   PROXYSQL_CLIENT           client program (default mysql, else mariadb)
#
# What it assumes:
#   - Every mapped site has one row in mysql_servers in the read hostgroup
#     (ProxySQL's key is hostgroup, host, port: the same server may also sit
#     in the writer hook's hostgroups).
#   - The read hostgroup is its own: NOT proxysql.sh's writer or standby
#     hostgroup (10, 20), which that hook moves rows between with their
#     status (a row set OFFLINE_SOFT here would become an offline writer),
#     and not in mysql_replication_hostgroups.
#
# What it does on reader-added and reader-removed (other events are
# ignored): in one admin session, sets status OFFLINE_SOFT on the read
# hostgroup's row of every mapped site NOT in the set (no new queries; open
# transactions finish), ONLINE on every mapped site in the set, loads the
# servers to runtime and saves them to disk, then checks that the runtime
# read hostgroup has exactly the readers ONLINE (an UPDATE that matched no
# row would otherwise pass silently). A reader that is not in PROXYSQL_SITES
# fails the run (exit 1) after the mapped sites are set.
set -Eeuo pipefail

die() { echo "proxysql-readers-hook: $*" >&2; exit 1; }

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
		PROXYSQL_SITES | PROXYSQL_READ_HOSTGROUP | PROXYSQL_ADMIN | PROXYSQL_USER | PROXYSQL_DEFAULTS_FILE | PROXYSQL_CLIENT)
			printf -v "$key" '%s' "$value"
			;;
		*) die "$1: unknown setting ${key@Q} (PROXYSQL_PASSWORD belongs in PROXYSQL_DEFAULTS_FILE)" ;;
		esac
	done <"$1"
fi

event=${FAILOVERD_EVENT:-}
if [[ $event != reader-added && $event != reader-removed ]]; then
	echo "proxysql-readers-hook: nothing to do on ${event:-an unnamed event}"
	exit 0
fi
admin=${PROXYSQL_ADMIN:-127.0.0.1:6032}
user=${PROXYSQL_USER:-admin}
hg=${PROXYSQL_READ_HOSTGROUP:-30}
[[ $hg =~ ^[0-9]+$ ]] || die "PROXYSQL_READ_HOSTGROUP ${hg@Q} is not a number"
[[ -n ${PROXYSQL_SITES:-} ]] || die "PROXYSQL_SITES is empty: map every reader site, e.g. \"site1=10.0.0.11:3306 site2=10.0.0.12:3306\""

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

declare -A is_reader=()
for site in ${FAILOVERD_READERS//,/ }; do
	is_reader[$site]=1
done

declare -A mapped=()
offline="" online="" readers=0
for entry in ${PROXYSQL_SITES//,/ }; do
	[[ $entry == *=* ]] || die "PROXYSQL_SITES entry ${entry@Q} is not SITE=HOST:PORT"
	site=${entry%%=*}
	split_addr "${entry#*=}"
	mapped[$site]=1
	if [[ -n ${is_reader[$site]:-} ]]; then
		online+="UPDATE mysql_servers SET status='ONLINE' WHERE hostgroup_id=$hg AND hostname='$host' AND port=$port;"$'\n'
		readers=$((readers + 1))
	else
		offline+="UPDATE mysql_servers SET status='OFFLINE_SOFT' WHERE hostgroup_id=$hg AND hostname='$host' AND port=$port;"$'\n'
	fi
done
unmapped=""
for site in "${!is_reader[@]}"; do
	[[ -n ${mapped[$site]:-} ]] || unmapped+=" $site"
done
sql="$offline$online"
sql+="LOAD MYSQL SERVERS TO RUNTIME;"$'\n'
sql+="SAVE MYSQL SERVERS TO DISK;"$'\n'
sql+="SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id=$hg AND status='ONLINE';"$'\n'

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
echo "proxysql-readers-hook: group ${FAILOVERD_GROUP:-?} epoch ${FAILOVERD_EPOCH:-?} $event ${FAILOVERD_SITE:-?}: read hostgroup $hg serves [${FAILOVERD_READERS:-}] via ProxySQL admin $admin"
out=$(printf '%s' "$sql" | "$client" "${args[@]}") || die "ProxySQL admin $admin refused the change (see above)"
if [[ $out != "$readers" ]]; then
	die "after the change runtime read hostgroup $hg has ${out:-0} servers ONLINE, want $readers: is every site in mysql_servers with hostgroup_id=$hg?"
fi
echo "proxysql-readers-hook: read hostgroup $hg now has $readers servers ONLINE"
[[ -z $unmapped ]] || die "reader(s)$unmapped not in PROXYSQL_SITES: map them, or they never serve reads"
