-- TransactSavings(a0, v), 15% of the mix: a deposit or a withdrawal.
-- (Account a0: draw_one_account.sql, put before this script by the runner.)
\set v random(-100, 100)
SELECT sb_transact_savings(:a0, :v, :check);
