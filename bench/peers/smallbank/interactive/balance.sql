-- Balance(a0), 15% of the mix: the read-only transaction.
-- (Account a0: draw_one_account.sql, put before this script by the runner.)
SELECT s.bal + c.bal AS total FROM savings s JOIN checking c ON c.id = s.id WHERE s.id = :a0 \gset
