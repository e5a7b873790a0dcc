-- A webhook's signing secret is stored sealed (MySQL widens its column); sqlite's text column holds
-- it as it is, so nothing changes here.
select 1;
