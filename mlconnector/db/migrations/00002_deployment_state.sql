-- What the connector submitted to the northbound API and what it last
-- observed of each deployment, and a key of its own for download tokens.

-- +goose Up
ALTER TABLE deployments
    ADD COLUMN submitted_generation bigint NOT NULL DEFAULT 0,
    ADD COLUMN reason text NOT NULL DEFAULT '',
    ADD COLUMN pods jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN serving jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN ready_at timestamptz,
    ADD COLUMN observed_at timestamptz;

CREATE TABLE settings (
    name  text PRIMARY KEY,
    value bytea NOT NULL
);

-- +goose Down
DROP TABLE settings;
ALTER TABLE deployments
    DROP COLUMN submitted_generation,
    DROP COLUMN reason,
    DROP COLUMN pods,
    DROP COLUMN serving,
    DROP COLUMN ready_at,
    DROP COLUMN observed_at;
