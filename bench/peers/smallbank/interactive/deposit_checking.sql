-- DepositChecking(a0, v), 15% of the mix.
-- Accounts as Pond draws them: the hot set (accounts 0 .. hot-1) with probability hot_ppm
-- in a million, else any account; uniform within either.
\set a0 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\set v random(1, 100)
BEGIN;
UPDATE checking SET bal = bal + :v WHERE id = :a0;
\if :check
INSERT INTO ledger VALUES (:v);
\endif
COMMIT;
