-- SmallBank on PostgreSQL, laid out as Pond's src/pond/bench/smallbank.cc lays it out: two
-- tables, savings and checking, one signed 64-bit balance per account, the same initial
-- balances. Run once per server by postgres_smallbank.sh with psql -v accounts=N; reset.sql
-- then refills the tables from sb_initial before every measured run.

-- Pond's Mix64 (splitmix64's finaliser, src/pond/base/hash.h) on unsigned 64-bit values.
-- PostgreSQL has no unsigned 64-bit type and its bigint arithmetic fails on overflow, so the
-- value lives in a bit(64) for the xor-shifts and in numeric, reduced mod 2^64, for the
-- multiplications. Slow, but it runs only at load time, once per account and table.
CREATE FUNCTION sb_bits_to_u64(b bit(64)) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT CASE WHEN b::bigint < 0 THEN b::bigint + 18446744073709551616
              ELSE b::bigint::numeric END
$$;

CREATE FUNCTION sb_u64_to_bits(u numeric) RETURNS bit(64)
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT (CASE WHEN u >= 9223372036854775808 THEN u - 18446744073709551616
               ELSE u END)::bigint::bit(64)
$$;

CREATE FUNCTION sb_mix64(x bigint) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  b bit(64) := x::bit(64);
BEGIN
  b := b # (b >> 30);
  b := sb_u64_to_bits(mod(sb_bits_to_u64(b) * 13787848793156543929, 18446744073709551616));
  b := b # (b >> 27);
  b := sb_u64_to_bits(mod(sb_bits_to_u64(b) * 10723151780598845931, 18446744073709551616));
  b := b # (b >> 31);
  RETURN sb_bits_to_u64(b);
END
$$;

-- Pond's InitialBalance: 10 000 to 49 999 units, a fixed hash of the account and the table.
CREATE FUNCTION sb_initial_balance(account bigint, checking boolean) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT 10000 + mod(sb_mix64(account * 2 + CASE WHEN checking THEN 1 ELSE 0 END), 40000)::bigint
$$;

-- Computed once: every measured run starts from a copy, so the hash is not paid again.
CREATE TABLE sb_initial AS
  SELECT a AS id, sb_initial_balance(a, false) AS sav, sb_initial_balance(a, true) AS chk
  FROM generate_series(0, :accounts - 1) AS a;

CREATE TABLE savings (id bigint PRIMARY KEY, bal bigint NOT NULL);
CREATE TABLE checking (id bigint PRIMARY KEY, bal bigint NOT NULL);

-- With --check, every transaction that changes the total appends its change here, in the same
-- transaction: a retried or failed attempt rolls its entry back with everything else. Append
-- only, with no index, because a blind insert reads nothing: under SERIALIZABLE it gives SSI no
-- read to conflict with, where updating a per-client row would (the planner scans a tiny table
-- sequentially, which locks all of it for SSI and makes every depositing pair conflict).
CREATE TABLE ledger (net bigint NOT NULL);

-- The six transactions as server-side functions, one call (one round trip) each, for the
-- default --style function. Each follows Pond's procedure of the same name. Rows are locked in
-- one global order — savings before checking, and two checking rows in account order — so two
-- transactions never wait on each other in a cycle: a deadlock would stall both for
-- deadlock_timeout (1 s) before PostgreSQL breaks it. chk <> 0 turns the ledger on.

-- Amalgamate: all of a0's money, savings and checking, moves to a1's checking.
CREATE FUNCTION sb_amalgamate(a0 bigint, a1 bigint, chk int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  s0 bigint;
  c0 bigint;
  c1 bigint;
  r record;
BEGIN
  SELECT bal INTO s0 FROM savings WHERE id = a0 FOR UPDATE;
  FOR r IN SELECT id, bal FROM checking WHERE id IN (a0, a1) ORDER BY id FOR UPDATE LOOP
    IF r.id = a0 THEN c0 := r.bal; ELSE c1 := r.bal; END IF;
  END LOOP;
  UPDATE savings SET bal = 0 WHERE id = a0;
  UPDATE checking SET bal = CASE WHEN id = a0 THEN 0 ELSE c1 + s0 + c0 END
    WHERE id IN (a0, a1);
END
$$;

-- Balance: the read-only one; both rows in one statement, so one snapshot.
CREATE FUNCTION sb_balance(a0 bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT s.bal + c.bal FROM savings s JOIN checking c ON c.id = s.id WHERE s.id = a0
$$;

-- DepositChecking: v > 0 into checking.
CREATE FUNCTION sb_deposit_checking(a0 bigint, v bigint, chk int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE checking SET bal = bal + v WHERE id = a0;
  IF chk <> 0 THEN INSERT INTO ledger VALUES (v); END IF;
END
$$;

-- SendPayment: v from a0's checking to a1's; declined (commits, writes nothing) if a0's
-- checking does not cover it.
CREATE FUNCTION sb_send_payment(a0 bigint, a1 bigint, v bigint, chk int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  c0 bigint;
  r record;
BEGIN
  FOR r IN SELECT id, bal FROM checking WHERE id IN (a0, a1) ORDER BY id FOR UPDATE LOOP
    IF r.id = a0 THEN c0 := r.bal; END IF;
  END LOOP;
  IF c0 < v THEN RETURN; END IF;
  UPDATE checking SET bal = bal + CASE WHEN id = a0 THEN -v ELSE v END WHERE id IN (a0, a1);
END
$$;

-- TransactSavings: v in [-100, 100] on savings; declined if it would make savings negative.
CREATE FUNCTION sb_transact_savings(a0 bigint, v bigint, chk int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE savings SET bal = bal + v WHERE id = a0 AND bal + v >= 0;
  IF FOUND AND chk <> 0 THEN INSERT INTO ledger VALUES (v); END IF;
END
$$;

-- WriteCheck: v > 0 out of checking, one unit more if savings + checking do not cover it
-- (checking may go negative). Savings is only read, as in Pond (SmallBank's write skew under
-- snapshot isolation).
CREATE FUNCTION sb_write_check(a0 bigint, v bigint, chk int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  s0 bigint;
  c0 bigint;
  out bigint;
BEGIN
  SELECT bal INTO s0 FROM savings WHERE id = a0;
  SELECT bal INTO c0 FROM checking WHERE id = a0 FOR UPDATE;
  out := CASE WHEN s0 + c0 < v THEN v + 1 ELSE v END;
  UPDATE checking SET bal = c0 - out WHERE id = a0;
  IF chk <> 0 THEN INSERT INTO ledger VALUES (-out); END IF;
END
$$;
