-- SendPayment(a0, a1, v), 25% of the mix.
-- (Accounts a0 and a1: draw_two_accounts.sql, put before this script by the runner.)
\set v random(1, 100)
SELECT sb_send_payment(:a0, :a1, :v, :check);
