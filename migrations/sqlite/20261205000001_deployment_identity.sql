-- The deployment's identity: a UUID made once, on this database's first need, and put on every
-- container and network the deployment makes (label `svc.deployment`), so that a second deployment
-- on the same engine (another database) never removes what it did not make.

create table deployment_identity (
    id integer primary key not null check (id = 1),
    deployment_id text not null,
    created_at integer not null
);
