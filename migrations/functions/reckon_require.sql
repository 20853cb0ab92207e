-- reckon_require(ok, code, message) raises an error with SQLSTATE code and
-- message unless ok is true, and returns true otherwise: a statement's
-- condition turned into an error that aborts its transaction, so that a
-- COMMIT queued behind the statement does not commit.
CREATE FUNCTION reckon_require(ok boolean, code text, message text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
    END IF;
    RETURN true;
END
$$;
