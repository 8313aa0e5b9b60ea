-- WriteCheck(a0, v), 15% of the mix.
-- (Account a0: draw_one_account.sql, put before this script by the runner.)
\set v random(1, 100)
BEGIN;
-- Savings is only read (no lock), as in Pond; checking is locked for the write.
SELECT s.bal AS s0, c.bal AS c0 FROM savings s, checking c
  WHERE s.id = :a0 AND c.id = :a0 FOR UPDATE OF c \gset
\set out case when :s0 + :c0 < :v then :v + 1 else :v end
UPDATE checking SET bal = bal - :out WHERE id = :a0;
\if :check
INSERT INTO ledger VALUES (-:out::bigint);
\endif
COMMIT;
