package evals

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ManifestFile is the name of a suite's manifest inside its fixture folder.
const ManifestFile = "manifest.json"

// Manifest records how a suite was generated, so it can be regenerated and
// so a reader knows which fixtures came from drills and which were written
// by hand.
type Manifest struct {
	Version     int    `json:"version"`
	GeneratedBy string `json:"generated_by"`
	Seed        uint64 `json:"seed"`
	// Count, Scenarios and Fixtures describe the drilled fixtures only.
	Count       int            `json:"count"`
	GeneratedAt time.Time      `json:"generated_at"`
	Scenarios   map[string]int `json:"scenarios"`
	Fixtures    []string       `json:"fixtures"`
	// HandMade lists fixtures of the suite that no drill produced: walls
	// written by a person (evals/adversarial_test.go) to hold what a drill
	// cannot stage, such as an external agent's own reports. A regenerated
	// drill suite keeps them. Absent from manifests written before.
	HandMade []string `json:"hand_made,omitempty"`
}

// WriteManifest writes dir/manifest.json atomically.
func WriteManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal manifest: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, ManifestFile), append(b, '\n'))
}

// ReadManifest reads dir/manifest.json; a missing manifest is reported as
// os.ErrNotExist so callers can treat hand-assembled folders leniently.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return &m, nil
}
