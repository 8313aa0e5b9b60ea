-- SendPayment(a0, a1, v), 25% of the mix.
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
\set v random(1, 100)
BEGIN;
SELECT sum(CASE WHEN id = :a0 THEN bal END) AS c0
  FROM (SELECT id, bal FROM checking WHERE id IN (:a0, :a1) ORDER BY id FOR UPDATE) AS locked \gset
-- Declined when a0's checking does not cover v: the transaction commits without writing.
\if :c0 >= :v
UPDATE checking SET bal = bal + CASE WHEN id = :a0 THEN -:v::bigint ELSE :v::bigint END
  WHERE id IN (:a0, :a1);
\endif
COMMIT;
