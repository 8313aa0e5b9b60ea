-- WriteCheck(a0, v), 15% of the mix.
-- Accounts as Pond draws them: the hot set (accounts 0 .. hot-1) with probability hot_ppm
-- in a million, else any account; uniform within either.
\set a0 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\set v random(1, 100)
SELECT sb_write_check(:a0, :v, :check);
