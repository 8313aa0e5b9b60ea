-- TransactSavings(a0, v), 15% of the mix: a deposit or a withdrawal.
-- (Account a0: draw_one_account.sql, put before this script by the runner.)
\set v random(-100, 100)
BEGIN;
SELECT bal AS s0 FROM savings WHERE id = :a0 FOR UPDATE \gset
-- Declined when it would make savings negative.
\if :s0 + :v >= 0
UPDATE savings SET bal = bal + :v WHERE id = :a0;
\if :check
INSERT INTO ledger VALUES (:v);
\endif
\endif
COMMIT;
