-- TransactSavings(a0, v), 15% of the mix: a deposit or a withdrawal.
-- Accounts as Pond draws them: the hot set (accounts 0 .. hot-1) with probability hot_ppm
-- in a million, else any account; uniform within either.
\set a0 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
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
