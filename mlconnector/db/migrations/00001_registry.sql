-- The ML connector's database: the model registry (models, numbered
-- versions, aliases, artifacts), deployments, their operations, drift
-- results and serving runtimes.

-- +goose Up
CREATE TABLE models (
    id                 text PRIMARY KEY,
    name               text NOT NULL,
    kind               text NOT NULL,
    format             text NOT NULL DEFAULT '',
    owner              text NOT NULL DEFAULT '',
    tags               text[] NOT NULL DEFAULT '{}',
    hyperparameters    jsonb NOT NULL DEFAULT '[]',
    performance        jsonb NOT NULL DEFAULT '[]',
    training_resources jsonb NOT NULL DEFAULT '[]',
    run_resources      jsonb NOT NULL DEFAULT '[]',
    features           jsonb NOT NULL DEFAULT '[]',
    inference          jsonb NOT NULL DEFAULT '[]',
    drift              jsonb NOT NULL DEFAULT '[]',
    created_by         text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX models_kind ON models (kind, id);
CREATE INDEX models_tags ON models USING gin (tags);
CREATE INDEX models_name ON models (name);

-- One row per uploaded file. Revisions count the uploads of one kind of
-- file of one model; a model file's revision is its version number.
CREATE TABLE artifacts (
    id           text PRIMARY KEY,
    model_id     text NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('model', 'data', 'code', 'env')),
    revision     integer NOT NULL CHECK (revision > 0),
    file_name    text NOT NULL,
    content_type text NOT NULL,
    size_bytes   bigint NOT NULL CHECK (size_bytes >= 0),
    sha256       text NOT NULL,
    object_key   text NOT NULL UNIQUE,
    created_by   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (model_id, kind, revision)
);

-- Each upload of a model file is a new version of the model.
CREATE TABLE model_versions (
    model_id    text NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    version     integer NOT NULL CHECK (version > 0),
    artifact_id text NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    format      text NOT NULL,
    created_by  text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_id, version)
);

CREATE TABLE model_aliases (
    model_id   text NOT NULL,
    alias      text NOT NULL,
    version    integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_id, alias),
    FOREIGN KEY (model_id, version) REFERENCES model_versions (model_id, version) ON DELETE CASCADE
);

-- Objects to delete from the artifact store: written in the transaction
-- that forgets their rows, removed once the store confirmed the deletion,
-- so that a store that is down loses nothing and leaks nothing.
CREATE TABLE object_deletions (
    object_key text PRIMARY KEY,
    queued_at  timestamptz NOT NULL DEFAULT now(),
    attempts   integer NOT NULL DEFAULT 0,
    last_error text NOT NULL DEFAULT ''
);

-- Serving runtimes registered at run time; the built-in ones live in code.
CREATE TABLE runtimes (
    name       text PRIMARY KEY,
    formats    text[] NOT NULL,
    image      text NOT NULL,
    port       integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    args       jsonb NOT NULL DEFAULT '[]',
    created_by text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE deployments (
    id         text PRIMARY KEY,
    model_id   text NOT NULL REFERENCES models (id),
    owner      text NOT NULL,
    spec       jsonb NOT NULL,
    version    integer NOT NULL,
    generation bigint NOT NULL DEFAULT 1,
    phase      text NOT NULL,
    message    text NOT NULL DEFAULT '',
    endpoint   jsonb,
    deleting   boolean NOT NULL DEFAULT false,
    created_by text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deployments_model ON deployments (model_id);
CREATE INDEX deployments_owner ON deployments (owner, id);

CREATE TABLE operations (
    id            bigserial PRIMARY KEY,
    deployment_id text NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    model_id      text NOT NULL,
    version       integer NOT NULL DEFAULT 0,
    owner         text NOT NULL,
    input         jsonb NOT NULL,
    output        jsonb,
    error         text NOT NULL DEFAULT '',
    latency_ms    double precision NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operations_owner ON operations (owner, id);
CREATE INDEX operations_deployment ON operations (deployment_id, id);
CREATE INDEX operations_model_time ON operations (model_id, created_at);

CREATE TABLE drift_runs (
    id          bigserial PRIMARY KEY,
    model_id    text NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    trigger     text NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    sample_size integer NOT NULL,
    reference_size integer NOT NULL,
    drifting    integer NOT NULL,
    message     text NOT NULL DEFAULT ''
);
CREATE INDEX drift_runs_model ON drift_runs (model_id, id);

CREATE TABLE drift_results (
    id         bigserial PRIMARY KEY,
    run_id     bigint NOT NULL REFERENCES drift_runs (id) ON DELETE CASCADE,
    model_id   text NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    feature    text NOT NULL,
    feature_type text NOT NULL,
    method     text NOT NULL,
    statistic  double precision NOT NULL,
    p_value    double precision,
    drift      boolean NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX drift_results_model ON drift_results (model_id, id);

-- +goose Down
DROP TABLE drift_results;
DROP TABLE drift_runs;
DROP TABLE operations;
DROP TABLE deployments;
DROP TABLE runtimes;
DROP TABLE object_deletions;
DROP TABLE model_aliases;
DROP TABLE model_versions;
DROP TABLE artifacts;
DROP TABLE models;
