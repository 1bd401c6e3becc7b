#!/bin/bash
# mariadb-backup.sh SITE DONOR: EXAMPLE failoverd reclone hook for MariaDB in
# production. It re-seeds the diverged recipient SITE with a physical copy of
# the DONOR (the group's current primary) made by mariadb-backup.
#
# THIS SCRIPT IS AN EXAMPLE: no test runs it (the tests only check that it
# parses, with bash -n and shellcheck). Read it, adapt it to your hosts, try it
# on a staging group first. The hook the tests run for real against MariaDB is
# test/e2e/testdata/reclone-mariadb-dump.sh (mariadb-dump, small data).
#
# Configure it in failoverd.yaml, e.g.:
#   reclone:
#     command: ["/usr/local/lib/failoverd/mariadb-backup.sh"]
#     timeout: 4h
# failoverd runs it as `COMMAND... SITE DONOR` with FAILOVERD_GROUP,
# FAILOVERD_SITE, FAILOVERD_SITE_ADDRESS, FAILOVERD_DONOR and
# FAILOVERD_DONOR_ADDRESS (MySQL host:port) in the environment, logs every
# output line, and kills the script's whole process group on timeout.
#
# What it assumes:
#   - It runs on a host (usually the failoverd host) that can ssh without a
#     prompt (keys, BatchMode) to the donor and the recipient. The ssh host
#     of a site is the host part of its MySQL address, unless RECLONE_SSH_HOSTS
#     maps it: RECLONE_SSH_HOSTS="site0=db0.example.net site1=db1.example.net".
#     The ssh user may run sudo without a password for mariadb-backup,
#     mbstream, mariadb, systemctl, mv, rm, mkdir and chown.
#   - mariadb-backup (with mbstream) is installed on both hosts, the same
#     version as the servers.
#   - On the recipient mysqld is managed by systemd (unit RECLONE_SERVICE,
#     default mariadb), its datadir is RECLONE_DATADIR (default
#     /var/lib/mysql) owned by RECLONE_DATADIR_OWNER (default mysql:mysql),
#     and its configuration has read_only=ON (failoverd requires every site
#     to start read-only); the parent directory of the datadir has room for a
#     second copy of the data.
#   - `sudo mariadb` and `sudo mariadb-backup` log in as root over the unix
#     socket (Debian's default unix_socket authentication), or find their
#     credentials in the server hosts' own option files ([client],
#     [mariadb-backup]). No password ever travels on a command line or
#     through this script.
#
# What it does:
#   1. Fences the recipient (SET GLOBAL read_only=ON, STOP SLAVE) if it runs.
#   2. Streams `mariadb-backup --backup --stream=xbstream` from the donor
#      through this host into `mbstream -x` in a staging directory next to
#      the recipient's datadir, then `mariadb-backup --prepare`s it there.
#   3. Stops mysqld, moves the old datadir aside to DATADIR.diverged-TIMESTAMP
#      (it holds the errant transactions: review them, then delete it by
#      hand), moves the prepared copy in place and starts mysqld.
#   4. Sets read_only=ON at once, RESET SLAVE ALL, RESET MASTER (no GTID of
#      its own, also when binlogs live outside the datadir), and
#      gtid_slave_pos to the donor GTID position recorded by the backup
#      (xtrabackup_binlog_info / mariadb_backup_binlog_info).
#   5. Checks read_only=ON and an empty gtid_binlog_state. Replication is left
#      to failoverd: it verifies that the site's GTIDs are contained in the
#      donor's and rejoins it (CHANGE MASTER ... MASTER_USE_GTID=current_pos).
set -Eeuo pipefail

usage="usage: $0 SITE DONOR (with FAILOVERD_SITE_ADDRESS and FAILOVERD_DONOR_ADDRESS set)"
site=${1:?$usage}
donor=${2:?$usage}
site_addr=${FAILOVERD_SITE_ADDRESS:?$usage}
donor_addr=${FAILOVERD_DONOR_ADDRESS:?$usage}
service=${RECLONE_SERVICE:-mariadb}
datadir=${RECLONE_DATADIR:-/var/lib/mysql}
datadir=${datadir%/}
owner=${RECLONE_DATADIR_OWNER:-mysql:mysql}
staging=$datadir.reclone-staging
old=$datadir.diverged-$(date -u +%Y%m%dT%H%M%SZ)

say() { printf 'reclone %s<-%s: %s\n' "$site" "$donor" "$*"; }
die() {
	printf 'reclone %s<-%s: ERROR: %s\n' "$site" "$donor" "$*" >&2
	exit 1
}
step="starting"
trap 'printf "reclone %s<-%s: FAILED during: %s\n" "$site" "$donor" "$step" >&2' ERR

# ssh_host NAME ADDR: where to ssh for site NAME.
ssh_host() {
	local pair
	for pair in ${RECLONE_SSH_HOSTS:-}; do
		if [[ ${pair%%=*} == "$1" ]]; then
			printf '%s' "${pair#*=}"
			return
		fi
	done
	local h=${2%:*}
	h=${h#[}
	printf '%s' "${h%]}"
}
site_host=$(ssh_host "$site" "$site_addr")
donor_host=$(ssh_host "$donor" "$donor_addr")
[[ $site_host != "$donor_host" ]] || die "recipient and donor resolve to the same host $site_host"

# on HOST CMD...: runs CMD on HOST; the arguments are quoted for the remote shell.
on() {
	local host=$1
	shift
	ssh -o BatchMode=yes -o ServerAliveInterval=15 "$host" "$(printf '%q ' "$@")"
}
# sql_site: runs the SQL on stdin on the recipient, rows without headers.
sql_site() { on "$site_host" sudo mariadb --batch --skip-column-names; }

say "recipient $site_host (datadir $datadir, unit $service), donor $donor_host"

step="fencing the recipient"
if on "$site_host" sudo systemctl is-active --quiet "$service"; then
	sql_site <<<"SET GLOBAL read_only=ON; STOP SLAVE;"
	say "recipient fenced: read_only=ON, replication stopped"
else
	say "recipient mysqld is not running; nothing to fence"
fi

step="preparing the staging directory $staging"
on "$site_host" sudo rm -rf -- "$staging"
on "$site_host" sudo mkdir -p -- "$staging"

step="streaming the backup from $donor_host"
say "streaming mariadb-backup from $donor_host into $site_host:$staging"
on "$donor_host" sudo mariadb-backup --backup --stream=xbstream --target-dir=/tmp |
	on "$site_host" sudo mbstream -x -C "$staging"

step="preparing the backup"
say "preparing the backup"
on "$site_host" sudo mariadb-backup --prepare --target-dir="$staging"

step="reading the donor GTID position from the backup"
# Newer mariadb-backup names the file mariadb_backup_binlog_info.
gtid=$({ on "$site_host" sudo cat -- "$staging/mariadb_backup_binlog_info" 2>/dev/null ||
	on "$site_host" sudo cat -- "$staging/xtrabackup_binlog_info"; } | awk 'NR == 1 { print $3 }')
[[ -n $gtid ]] || die "the backup holds no GTID position (is log_bin enabled on the donor?)"
[[ $gtid =~ ^[0-9]+-[0-9]+-[0-9]+(,[0-9]+-[0-9]+-[0-9]+)*$ ]] || die "unexpected GTID position in the backup: $gtid"
say "the backup is at donor GTID position $gtid"

step="replacing the datadir (old one kept at $old)"
say "stopping $service and replacing $datadir; the diverged datadir is kept at $old"
on "$site_host" sudo systemctl stop "$service"
on "$site_host" sudo mv -- "$datadir" "$old"
on "$site_host" sudo mv -- "$staging" "$datadir"
on "$site_host" sudo chown -R -- "$owner" "$datadir"

step="starting $service"
on "$site_host" sudo systemctl start "$service"
# First statement after the start: a datadir started without read_only in
# the configuration must not stay writable one moment longer than needed.
was_ro=$(sql_site <<<"SELECT @@read_only; SET GLOBAL read_only=ON;")
[[ $was_ro == 1 ]] || say "WARNING: mysqld started writable (read_only=$was_ro): set read_only=ON in its configuration"

step="setting the GTID state"
sql_site <<<"STOP SLAVE; RESET SLAVE ALL; RESET MASTER; SET GLOBAL gtid_slave_pos='$gtid';"

step="checking the result"
ro=$(sql_site <<<"SELECT @@read_only")
binlog_state=$(sql_site <<<"SELECT @@gtid_binlog_state")
current=$(sql_site <<<"SELECT @@gtid_current_pos")
[[ $ro == 1 ]] || die "the recipient is not read-only (read_only=$ro)"
[[ -z $binlog_state ]] || die "the recipient has binlog GTIDs of its own: $binlog_state"
say "done: read_only=ON gtid_binlog_state='' gtid_current_pos=$current; failoverd rejoins it as a replica"
say "the diverged datadir is kept at $site_host:$old: review its errant transactions, then remove it"
