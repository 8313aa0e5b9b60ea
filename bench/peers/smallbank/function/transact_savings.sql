-- TransactSavings(a0, v), 15% of the mix: a deposit or a withdrawal.
-- Accounts as Pond draws them: the hot set (accounts 0 .. hot-1) with probability hot_ppm
-- in a million, else any account; uniform within either.
\set a0 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\set v random(-100, 100)
SELECT sb_transact_savings(:a0, :v, :check);
