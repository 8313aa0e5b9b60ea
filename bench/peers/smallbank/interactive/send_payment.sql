-- SendPayment(a0, a1, v), 25% of the mix.
-- (Accounts a0 and a1: draw_two_accounts.sql, put before this script by the runner.)
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
