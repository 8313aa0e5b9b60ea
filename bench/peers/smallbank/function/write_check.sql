-- WriteCheck(a0, v), 15% of the mix.
-- (Account a0: draw_one_account.sql, put before this script by the runner.)
\set v random(1, 100)
SELECT sb_write_check(:a0, :v, :check);
