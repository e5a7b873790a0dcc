-- The deployment's identity: a UUID made once, on this database's first need, and put on every
-- container and network the deployment makes (label `svc.deployment`), so that a second deployment
-- on the same engine (another database) never removes what it did not make.

create table deployment_identity (
    id int not null primary key,
    deployment_id char(36) not null,
    created_at bigint not null
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci;
