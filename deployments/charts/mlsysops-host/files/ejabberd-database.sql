-- ejabberd's role and database on the bundled PostgreSQL, run by the
-- superuser at every start of ejabberd's pod: each statement may run
-- again. The role has no password: it logs in with its client
-- certificate only (pg_hba.conf).
SELECT 'CREATE ROLE ejabberd LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ejabberd')\gexec
ALTER ROLE ejabberd LOGIN PASSWORD NULL;
SELECT 'CREATE DATABASE ejabberd OWNER ejabberd' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'ejabberd')\gexec
ALTER DATABASE ejabberd OWNER TO ejabberd;
\connect ejabberd
-- Tables an earlier install made as another role (their sequences follow).
SELECT format('ALTER TABLE public.%I OWNER TO ejabberd', tablename) FROM pg_tables WHERE schemaname = 'public' AND tableowner <> 'ejabberd'\gexec
