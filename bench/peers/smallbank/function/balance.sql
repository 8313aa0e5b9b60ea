-- Balance(a0), 15% of the mix: the read-only transaction.
-- (Account a0: draw_one_account.sql, put before this script by the runner.)
SELECT sb_balance(:a0) AS total \gset
