-- Credential reuse: the credentials of one secret (and principal), found without a scan, for the
-- reuse findings that group them. Same index as the sqlite migration of the same name.
create index ix_credentials_secret on credentials (secret_sha256, secret_kind);
