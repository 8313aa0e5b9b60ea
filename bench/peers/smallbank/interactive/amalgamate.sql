-- Amalgamate(a0, a1), 15% of the mix.
-- (Accounts a0 and a1: draw_two_accounts.sql, put before this script by the runner.)
-- Locks in the global order of schema.sql: savings, then the checking rows in account order.
BEGIN;
SELECT bal AS s0 FROM savings WHERE id = :a0 FOR UPDATE \gset
SELECT sum(CASE WHEN id = :a0 THEN bal END) AS c0
  FROM (SELECT id, bal FROM checking WHERE id IN (:a0, :a1) ORDER BY id FOR UPDATE) AS locked \gset
UPDATE savings SET bal = 0 WHERE id = :a0;
UPDATE checking SET bal = CASE WHEN id = :a0 THEN 0 ELSE bal + :s0 + :c0 END
  WHERE id IN (:a0, :a1);
COMMIT;
