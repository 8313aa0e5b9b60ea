-- Before every measured run: the tables as loaded, an empty ledger, no dead rows from the
-- previous run (TRUNCATE gives new files), statistics fresh, and a checkpoint taken so that the
-- run does not pay for the load's dirty pages.
TRUNCATE savings, checking, ledger;
INSERT INTO savings SELECT id, sav FROM sb_initial;
INSERT INTO checking SELECT id, chk FROM sb_initial;
VACUUM ANALYZE savings, checking;
CHECKPOINT;
