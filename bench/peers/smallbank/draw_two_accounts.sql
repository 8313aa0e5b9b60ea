-- Prelude of Amalgamate and SendPayment (the runner puts it before each script).
-- Accounts as Pond draws them: the hot set (accounts 0 .. hot-1) with probability hot_ppm
-- in a million, else any account; uniform within either.
\set a0 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
-- The second account: drawn the same way, up to eight draws in all while it equals the
-- first, then the next account (Pond's bounded redraw, unrolled: scripts have no loops).
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\if :a1 = :a0
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\endif
\if :a1 = :a0
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\endif
\if :a1 = :a0
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\endif
\if :a1 = :a0
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\endif
\if :a1 = :a0
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\endif
\if :a1 = :a0
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\endif
\if :a1 = :a0
\set a1 case when random(0, 999999) < :hot_ppm then random(0, :hot - 1) else random(0, :accounts - 1) end
\endif
\if :a1 = :a0
\set a1 (:a0 + 1) % :accounts
\endif
