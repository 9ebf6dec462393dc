// Package services runs the stateful services of the testbed as real
// processes: Redis (password, AOF), ejabberd (own config, spool and logs,
// STARTTLS, no in-band registration, admin API on loopback), PostgreSQL
// (a cluster of its own, password auth) and an S3 server (versitygw, POSIX
// backend). Each service has Start (idempotent), Stop (graceful), Kill (a
// crash) and Healthy, so tests can restart or crash them on purpose.
package services
