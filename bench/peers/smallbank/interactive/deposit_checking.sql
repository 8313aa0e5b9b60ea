-- DepositChecking(a0, v), 15% of the mix.
-- (Account a0: draw_one_account.sql, put before this script by the runner.)
\set v random(1, 100)
BEGIN;
UPDATE checking SET bal = bal + :v WHERE id = :a0;
\if :check
INSERT INTO ledger VALUES (:v);
\endif
COMMIT;
