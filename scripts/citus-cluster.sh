#!/bin/sh
# A Citus trial cluster on one machine: a coordinator and two workers, each
# a PostgreSQL of its own made by initdb (docs/scaling-out.md). Citus must be
# installed into this PostgreSQL already (its citus.so in pg_config's
# library directory).
#
#   scripts/citus-cluster.sh init   make, start and register the three nodes
#   scripts/citus-cluster.sh start  start them
#   scripts/citus-cluster.sh stop   stop them
#
# CITUS_DIR (default /work/citus-cluster) holds one data directory per port;
# CITUS_PORTS (default "9700 9701 9702") are the coordinator's port, then the
# workers'. Run as a user initdb accepts (not root): as root, the script runs
# itself again as postgres.
set -eu

dir=${CITUS_DIR:-/work/citus-cluster}
ports=${CITUS_PORTS:-9700 9701 9702}
bin=$(pg_config --bindir)

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$dir"
	chown postgres "$dir"
	exec su postgres -s /bin/sh -c "CITUS_DIR='$dir' CITUS_PORTS='$ports' '$(readlink -f "$0")' $*"
fi

psql_on() { port=$1; shift; "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h localhost -p "$port" -U postgres -d postgres "$@"; }

case ${1:-} in
init)
	for port in $ports; do
		"$bin/initdb" -D "$dir/$port" -U postgres --auth=trust >/dev/null
		cat >>"$dir/$port/postgresql.conf" <<EOF
port = $port
listen_addresses = 'localhost'
unix_socket_directories = '$dir/$port'
shared_preload_libraries = 'citus'
max_connections = 300
# Two-phase commits that Citus starts need prepared transactions.
max_prepared_transactions = 300
# The live feed's lag is timed from commits.
track_commit_timestamp = on
# Shard moves that do not block writes (citus_rebalance_start) replicate
# by logical decoding.
wal_level = logical
EOF
		"$bin/pg_ctl" -D "$dir/$port" -l "$dir/$port.log" -w start >/dev/null
		# Citus turns TLS on as it is created (its default node_conninfo
		# requires it); the nodes then talk without it, over loopback
		# (docs/scaling-out.md, Citus settings).
		psql_on "$port" -c 'CREATE EXTENSION citus'
		psql_on "$port" -c "ALTER SYSTEM SET citus.node_conninfo = 'sslmode=disable'" -c 'SELECT pg_reload_conf()' >/dev/null
		# A shard split (citus_split_shard_by_split_points, to grow the
		# cluster past its shards) decodes with Citus's own output plugin,
		# which PostgreSQL releases that list the allowed ones refuse unless
		# it is named (docs/scaling-out.md, Growing the cluster).
		if [ "$(psql_on "$port" -Atc "SELECT count(*) FROM pg_settings WHERE name = 'output_plugin_libraries'")" = 1 ]; then
			psql_on "$port" -c "ALTER SYSTEM SET output_plugin_libraries = pgoutput, test_decoding, citus" -c 'SELECT pg_reload_conf()' >/dev/null
		fi
	done
	set -- $ports
	coord=$1
	shift
	psql_on "$coord" -c "SELECT citus_set_coordinator_host('localhost', $coord)"
	for port in "$@"; do
		psql_on "$coord" -c "SELECT citus_add_node('localhost', $port)"
	done
	;;
start)
	for port in $ports; do
		"$bin/pg_ctl" -D "$dir/$port" -l "$dir/$port.log" -w start >/dev/null
	done
	;;
stop)
	for port in $ports; do
		"$bin/pg_ctl" -D "$dir/$port" -m fast -w stop >/dev/null
	done
	;;
*)
	echo "usage: $0 init|start|stop" >&2
	exit 2
	;;
esac
