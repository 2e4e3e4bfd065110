#!/bin/sh
# Creates (or upgrades) the Temporal server's two PostgreSQL databases with the server's
# schema tool. Run by docker-compose.yml's temporal-admin-tools service and by the test
# suite on the real server; safe to run again on an existing database.
#
#   POSTGRES_SEEDS, DB_PORT, POSTGRES_USER, POSTGRES_PWD   where and as whom
#   SCHEMA_DIR   the server release's schema/postgresql/v12 folder
#   SQL_TOOL     temporal-sql-tool (the server's cmd/tools/sql)
set -eu
tool="${SQL_TOOL:-temporal-sql-tool}"
schema="${SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}"
export SQL_PASSWORD="${POSTGRES_PWD:-}"

sql() {
  "$tool" --plugin postgres12 --ep "${POSTGRES_SEEDS:-127.0.0.1}" -p "${DB_PORT:-5432}" \
    -u "${POSTGRES_USER:-temporal}" --db "$@"
}

for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
  db="${pair%%:*}"
  kind="${pair#*:}"
  # Both fail harmlessly on a database made by an earlier run; update-schema then reports
  # anything really wrong (no connection, no rights).
  sql "$db" create >/dev/null 2>&1 || true
  sql "$db" setup-schema -v 0.0 >/dev/null 2>&1 || true
  sql "$db" update-schema -d "$schema/$kind/versioned"
done
