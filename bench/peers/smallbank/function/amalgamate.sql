-- Amalgamate(a0, a1), 15% of the mix.
-- (Accounts a0 and a1: draw_two_accounts.sql, put before this script by the runner.)
SELECT sb_amalgamate(:a0, :a1, :check);
