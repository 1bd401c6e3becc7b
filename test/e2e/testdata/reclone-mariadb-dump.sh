#!/bin/bash
# reclone-mariadb-dump.sh SITE DONOR: a failoverd reclone hook (reclone.command)
# for MariaDB that re-seeds the recipient SITE from the DONOR (the group's
# current primary) with mariadb-dump, over TCP. The tests run it against real
# servers (reclone/mariadb_dump_test.go); it also suits small groups.
#
# failoverd runs it as `COMMAND... SITE DONOR` with FAILOVERD_GROUP,
# FAILOVERD_SITE, FAILOVERD_SITE_ADDRESS, FAILOVERD_DONOR and
# FAILOVERD_DONOR_ADDRESS (host:port) in the environment.
#   RECLONE_USER           account used on both servers (default root); it
#                          needs ALL (READ_ONLY ADMIN writes through read_only,
#                          RELOAD/BINLOG MONITOR for the dump's position)
#   RECLONE_PASSWORD_FILE  optional file holding that account's password
#                          (never passed on a command line: the clients read
#                          it from a private option file)
#
# What it does, on the recipient unless said otherwise:
#   1. SET GLOBAL read_only=ON, kept to the end: no application write lands
#      while the data is replaced.
#   2. STOP SLAVE; RESET SLAVE ALL: forget the old source.
#   3. Drop every non-system database (mysql, sys and the schemas are kept,
#      so accounts stay the recipient's own).
#   4. RESET MASTER (drops the errant binlog and gtid_binlog_state) and
#      gtid_slave_pos=''.
#   5. mariadb-dump --single-transaction --master-data=1 --gtid of every
#      non-system database of the donor, restored with sql_log_bin=0 so the
#      restore makes no GTID of its own; the dump sets gtid_slave_pos to the
#      donor position of its snapshot.
#   6. RESET SLAVE ALL again (the dump's CHANGE MASTER TO
#      MASTER_USE_GTID=slave_pos), events set DISABLE ON SLAVE (a replica must
#      not run them).
#   7. Checks read_only=ON and an empty gtid_binlog_state, and prints the
#      positions. Replication is NOT started: failoverd checks the result and
#      rejoins the site itself (MASTER_USE_GTID=current_pos).
set -euo pipefail

usage="usage: $0 SITE DONOR (with FAILOVERD_SITE_ADDRESS and FAILOVERD_DONOR_ADDRESS set)"
site=${1:?$usage}
donor=${2:?$usage}
site_addr=${FAILOVERD_SITE_ADDRESS:?$usage}
donor_addr=${FAILOVERD_DONOR_ADDRESS:?$usage}
user=${RECLONE_USER:-root}

say() { printf 'reclone %s<-%s: %s\n' "$site" "$donor" "$*"; }
die() { printf 'reclone %s<-%s: ERROR: %s\n' "$site" "$donor" "$*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
umask 077

# Option file for both clients: the password never appears in argv.
cnf=$tmp/client.cnf
{
	printf '[mysql]\nconnect-timeout=10\n[client]\n'
	printf 'user="%s"\n' "$(printf '%s' "$user" | sed 's/[\\"]/\\&/g')"
	if [[ -n ${RECLONE_PASSWORD_FILE:-} ]]; then
		[[ -r $RECLONE_PASSWORD_FILE ]] || die "RECLONE_PASSWORD_FILE $RECLONE_PASSWORD_FILE is not readable"
		pw=$(<"$RECLONE_PASSWORD_FILE")
		[[ $pw != *$'\n'* ]] || die "RECLONE_PASSWORD_FILE holds more than one line"
		printf 'password="%s"\n' "$(printf '%s' "$pw" | sed 's/[\\"]/\\&/g')"
	fi
} >"$cnf"

# host_of/port_of split host:port ([v6]:port too).
host_of() { local h=${1%:*}; h=${h#[}; printf '%s' "${h%]}"; }
port_of() { printf '%s' "${1##*:}"; }

# sql ADDR [mariadb options...]: runs the SQL on stdin against ADDR, prints
# tab-separated rows without headers.
sql() {
	local addr=$1
	shift
	mariadb --defaults-file="$cnf" --protocol=TCP --host="$(host_of "$addr")" --port="$(port_of "$addr")" \
		--batch --skip-column-names --skip-reconnect "$@"
}

# user_databases ADDR: one non-system database name per line.
user_databases() {
	sql "$1" <<<"SELECT schema_name FROM information_schema.schemata
		WHERE schema_name NOT IN ('mysql','information_schema','performance_schema','sys') ORDER BY schema_name"
}

# ident NAME: NAME as a quoted SQL identifier.
ident() {
	local bt='`'
	printf '%s%s%s' "$bt" "${1//$bt/$bt$bt}" "$bt"
}

say "recipient $site_addr, donor $donor_addr, user $user"
[[ $(sql "$site_addr" <<<"SELECT @@server_id") != "$(sql "$donor_addr" <<<"SELECT @@server_id")" ]] ||
	die "recipient and donor are the same server"

say "fencing the recipient (read_only=ON) and forgetting its source"
sql "$site_addr" <<<"SET GLOBAL read_only=ON; STOP SLAVE; RESET SLAVE ALL;"

mapfile -t old_dbs < <(user_databases "$site_addr")
drops="SET SESSION sql_log_bin=0;"
for db in "${old_dbs[@]}"; do
	drops+=" DROP DATABASE $(ident "$db");"
done
say "dropping ${#old_dbs[@]} database(s) on the recipient: ${old_dbs[*]:-none}"
sql "$site_addr" <<<"$drops"

say "clearing the recipient's binlog and GTID state (was binlog_state=$(sql "$site_addr" <<<"SELECT @@gtid_binlog_state"))"
sql "$site_addr" <<<"RESET MASTER; SET GLOBAL gtid_slave_pos='';"

mapfile -t dbs < <(user_databases "$donor_addr")
if ((${#dbs[@]} == 0)); then
	# Nothing to copy: the donor's position alone makes the recipient current.
	pos=$(sql "$donor_addr" <<<"SELECT @@gtid_binlog_pos")
	say "the donor has no database to copy; gtid_slave_pos=$pos"
	sql "$site_addr" <<<"SET GLOBAL gtid_slave_pos='$pos'"
else
	say "copying ${#dbs[@]} database(s) from the donor: ${dbs[*]}"
	# sql_log_bin=0 first in the stream: the restore must not write GTIDs of
	# the recipient's own (they would be errant again); --skip-reconnect
	# keeps a dropped connection from continuing without it.
	{
		printf 'SET SESSION sql_log_bin=0;\n'
		mariadb-dump --defaults-file="$cnf" --protocol=TCP --host="$(host_of "$donor_addr")" --port="$(port_of "$donor_addr")" \
			--single-transaction --master-data=1 --gtid --routines --events --triggers --hex-blob \
			--databases "${dbs[@]}"
	} | sql "$site_addr"
fi

# The dump ends with CHANGE MASTER TO MASTER_USE_GTID=slave_pos and SET GLOBAL
# gtid_slave_pos: keep the position, drop the half-made source (the daemon
# configures replication itself).
sql "$site_addr" <<<"RESET SLAVE ALL"

# Events restored ENABLED would run on a replica and write errant GTIDs.
mapfile -t events < <(sql "$site_addr" <<<"SELECT event_schema, event_name FROM information_schema.events WHERE status='ENABLED'")
if ((${#events[@]} > 0)); then
	alters="SET SESSION sql_log_bin=0;"
	for e in "${events[@]}"; do
		alters+=" ALTER EVENT $(ident "${e%%$'\t'*}").$(ident "${e#*$'\t'}") DISABLE ON SLAVE;"
	done
	say "disabling ${#events[@]} event(s) on the recipient"
	sql "$site_addr" <<<"$alters"
fi

ro=$(sql "$site_addr" <<<"SELECT @@read_only")
binlog_state=$(sql "$site_addr" <<<"SELECT @@gtid_binlog_state")
slave_pos=$(sql "$site_addr" <<<"SELECT @@gtid_slave_pos")
current_pos=$(sql "$site_addr" <<<"SELECT @@gtid_current_pos")
[[ $ro == 1 ]] || die "the recipient is not read-only after the restore (read_only=$ro)"
[[ -z $binlog_state ]] || die "the restore wrote binlog events on the recipient (gtid_binlog_state=$binlog_state)"
say "done: read_only=ON gtid_binlog_state='' gtid_slave_pos=$slave_pos gtid_current_pos=$current_pos (donor gtid_binlog_pos=$(sql "$donor_addr" <<<"SELECT @@gtid_binlog_pos"))"
