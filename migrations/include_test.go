package migrations

import (
	"io/fs"
	"path"
	"strings"
	"testing"
	"testing/fstest"
)

// TestIncludes: every include of the embedded migrations resolves, every
// function file is included by some migration and defines the function it
// is named after, and no migration holds a PL/pgSQL body of its own (one
// source per function).
func TestIncludes(t *testing.T) {
	t.Parallel()
	src, err := expand(files)
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(files, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v, %v", names, err)
	}
	includedBy := map[string][]string{}
	for _, name := range names {
		raw := read(t, files, name)
		if strings.Contains(strings.ToLower(raw), "language plpgsql") {
			t.Errorf("%s holds a PL/pgSQL function; put it in functions/ and include it", name)
		}
		for line := range strings.Lines(raw) {
			if target, ok, _ := includeTarget(line); ok {
				includedBy[target] = append(includedBy[target], name)
			}
		}
		if got := read(t, src, name); strings.Contains(got, directive) {
			t.Errorf("%s still holds a directive after expansion", name)
		}
	}
	funcs, err := fs.Glob(files, "functions/*.sql")
	if err != nil || len(funcs) == 0 {
		t.Fatalf("function files: %v, %v", funcs, err)
	}
	for _, f := range funcs {
		if len(includedBy[f]) == 0 {
			t.Errorf("%s is included by no migration", f)
		}
		fn := strings.TrimSuffix(path.Base(f), ".sql")
		if !strings.Contains(read(t, files, f), " FUNCTION "+fn+"(") {
			t.Errorf("%s does not define function %s", f, fn)
		}
	}
}

// TestIncludeExpandsInPlace: the directive's line is replaced by the
// included file, byte for byte, and every other line is kept as it is.
func TestIncludeExpandsInPlace(t *testing.T) {
	t.Parallel()
	src := fstest.MapFS{
		"00001_a.sql":     {Data: []byte("-- +goose Up\n-- +goose StatementBegin\n  -- +reckon include functions/f.sql\n-- +goose StatementEnd\n-- end")},
		"functions/f.sql": {Data: []byte("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;")},
	}
	out, err := expand(src)
	if err != nil {
		t.Fatal(err)
	}
	want := "-- +goose Up\n-- +goose StatementBegin\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n-- +goose StatementEnd\n-- end"
	if got := read(t, out, "00001_a.sql"); got != want {
		t.Fatalf("expanded:\n%q\nwant\n%q", got, want)
	}
}

// TestIncludeErrors: a migration that does not resolve is refused before
// anything is applied, with an error naming the migration, its line and
// what is wrong.
func TestIncludeErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, migration string
		want            []string
	}{
		{"missing file", "-- +goose Up\n-- +reckon include functions/missing.sql\n",
			[]string{"migration 00007_x.sql", "line 2", "include functions/missing.sql", "not exist"}},
		{"unknown directive", "-- +goose Up\n-- +reckon inclde functions/f.sql\n",
			[]string{"migration 00007_x.sql", "line 2", "unknown directive"}},
		{"no file named", "-- +goose Up\n\n-- +reckon include\n",
			[]string{"migration 00007_x.sql", "line 3", "unknown directive"}},
		{"nested include", "-- +goose Up\n-- +reckon include functions/nested.sql\n",
			[]string{"migration 00007_x.sql", "include functions/nested.sql", "no directive of its own"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := fstest.MapFS{
				"00007_x.sql":          {Data: []byte(tc.migration)},
				"functions/f.sql":      {Data: []byte("SELECT 1;\n")},
				"functions/nested.sql": {Data: []byte("-- +reckon include functions/f.sql\n")},
			}
			_, err := expand(src)
			if err == nil {
				t.Fatal("expanded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func read(t *testing.T, fsys fs.FS, name string) string {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
