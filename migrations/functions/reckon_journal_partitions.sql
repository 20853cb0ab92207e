-- reckon_week_after(at) is the start of the week after the one holding
-- at: the upper bound of at's partition of the journal (weeks begin on
-- Monday 00:00 UTC).
CREATE OR REPLACE FUNCTION reckon_week_after(at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (date_trunc('week', at AT TIME ZONE 'UTC') + interval '7 days') AT TIME ZONE 'UTC'
$$;

-- reckon_journal_partitions() lists the journal's partitions
-- (docs/scaling.md#time-partitions-and-retention) with the range of
-- ingested_at each holds, read from the catalog of the current schema:
-- lower_bound is null for the oldest (it starts at MINVALUE), and both are
-- null for the default partition, which catches rows no range holds.
CREATE OR REPLACE FUNCTION reckon_journal_partitions()
RETURNS TABLE (name text, lower_bound timestamptz, upper_bound timestamptz, is_default boolean)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           (regexp_match(b.expr, 'FROM \(''([^'']+)''\)'))[1]::timestamptz,
           (regexp_match(b.expr, 'TO \(''([^'']+)''\)'))[1]::timestamptz,
           b.expr = 'DEFAULT'
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b
    WHERE i.inhparent = 'journal_events'::regclass
    ORDER BY 3 NULLS FIRST
$$;

-- reckon_journal_extend(until) creates the journal's weekly partitions
-- (Monday 00:00 UTC to the next) from the end of the newest one until the
-- week holding until, and returns how many it created. A week whose rows
-- already went to the default partition (nobody extended the journal in
-- time) is left to the default partition: creating its partition would
-- fail on them. TestExtendSkipsWeeksInDefault.
CREATE OR REPLACE FUNCTION reckon_journal_extend(until timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz;
    hi timestamptz;
    made integer := 0;
BEGIN
    SELECT max(p.upper_bound) INTO lo FROM reckon_journal_partitions() p;
    IF lo IS NULL THEN
        lo := date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    END IF;
    WHILE lo <= until LOOP
        hi := lo + interval '7 days';
        IF NOT EXISTS (SELECT 1 FROM journal_events_default d
                       WHERE d.ingested_at >= lo AND d.ingested_at < hi) THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF journal_events FOR VALUES FROM (%L) TO (%L)',
                           'journal_events_p' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD'), lo, hi);
            made := made + 1;
        END IF;
        lo := hi;
    END LOOP;
    RETURN made;
END
$$;
