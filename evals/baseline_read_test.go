package evals

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadBaselineRefusesFilesWithoutFloors: a baseline is the floor the
// gate holds a supervisor to. A JSON file without accuracy and coverage
// (an empty object, or report.json passed to --gate by mistake) read as
// floors of 0 and 0, so the gate passed whatever the accuracy and
// coverage. It is refused, naming the missing field; baselines recorded
// by earlier versions keep loading.
func TestReadBaselineRefusesFilesWithoutFloors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty.json":    `{}`,
		"report.json":   `{"supervisor":"builtin","metrics":{"accuracy":1,"coverage":0.9}}`,
		"no-cover.json": `{"supervisor":"builtin","accuracy":1}`,
		"no-acc.json":   `{"supervisor":"builtin","coverage":0.9}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		bl, err := ReadBaseline(path)
		if err == nil || !(strings.Contains(err.Error(), "accuracy") || strings.Contains(err.Error(), "coverage")) {
			t.Errorf("%s: %+v %v, want an error naming the missing floor", name, bl, err)
		}
	}
	for _, path := range []string{"testdata/baseline-20261130-v1.json", BaselineFile} {
		if bl, err := ReadBaseline(path); err != nil || bl.Accuracy == 0 {
			t.Errorf("%s: %+v %v", path, bl, err)
		}
	}
}
