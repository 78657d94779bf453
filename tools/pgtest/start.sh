#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests of log/logpg and of
# many sidecars on one log: initdb in a fresh temp dir as the postgres user
# (initdb refuses to run as root), the server on 127.0.0.1 and a free port,
# fsync on (the tests measure what production would do). Installs Debian's
# postgresql package first if no server binaries are found.
#
# It prints the variables the Go tests read, ready for eval:
#   PROVLOG_TEST_POSTGRES  a superuser DSN; each test makes its own database
#   PROVLOG_PG_BIN         the directory of initdb, pg_ctl, postgres and psql
#                          (failover tests start clusters of their own)
#   PROVLOG_PG_DIR         the cluster's dir; stop it with tools/pgtest/stop.sh
#
# Usage: eval "$(bash tools/pgtest/start.sh)"; ...; bash tools/pgtest/stop.sh
set -euo pipefail

bin="${PROVLOG_PG_BIN:-}"
if [ -z "$bin" ]; then
	bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
fi
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
	echo "pgtest: no PostgreSQL server binaries; installing Debian's postgresql" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
	bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
fi
for b in initdb pg_ctl postgres psql; do
	[ -x "$bin/$b" ] || { echo "pgtest: $bin/$b is missing" >&2; exit 1; }
done

# as runs a command as the postgres user when we are root; initdb and the
# server refuse to run as root.
as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

dir="$(mktemp -d "${TMPDIR:-/tmp}/provlog-pg.XXXXXX")"
chmod 0755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
as "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 || {
	cat "$dir/initdb.log" >&2
	exit 1
}

# A free port: ask the kernel for one, then let the server bind it (a race
# with another process is possible but rare; pg_ctl then fails loudly).
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))"
as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300 -c shared_buffers=128MB" start >&2 || {
	cat "$dir/server.log" >&2
	exit 1
}
echo "pgtest: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, dir $dir" >&2
echo "export PROVLOG_TEST_POSTGRES='postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable'"
echo "export PROVLOG_PG_BIN='$bin'"
echo "export PROVLOG_PG_DIR='$dir'"
