#!/usr/bin/env bash
# Stops the cluster tools/pgtest/start.sh started ($PROVLOG_PG_DIR) and
# removes its dir.
set -euo pipefail
dir="${PROVLOG_PG_DIR:?PROVLOG_PG_DIR is not set}"
bin="${PROVLOG_PG_BIN:?PROVLOG_PG_BIN is not set}"
if [ "$(id -u)" = 0 ]; then
	runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
else
	"$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
fi
rm -rf "$dir"
