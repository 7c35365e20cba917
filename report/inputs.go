package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/sigdata/sig/fleet/results"
	"github.com/sigdata/sig/internal/figure"
)

// The bench files the report reads, and the command that writes each.
const (
	FleetFull = "fleet-full.json"
	// FleetFullDefault is the full fleet at ingestion's default block
	// size (issue 28: a larger block alone must not be what meets the
	// targets, so both runs are shown).
	FleetFullDefault = "fleet-full-default.json"
	FleetRun         = "fleet-run.json"
	TrainerFleet     = "fleet.json"
	Preemption       = "preemption.json"
	Scale            = "scale.json"
	Embeddings       = "embeddings.json"
	// TrainerFleetDefaults is the training fleet simulation with its
	// default constants alone: shown beside fleet.json, not a section of
	// its own.
	TrainerFleetDefaults = "fleet-defaults.json"
)

// makes says which command writes each input.
var makes = map[string]string{
	FleetFull:        "`sigctl fleet --out bench/fleet-full.json` (the full fleet: 300 pipelines or more)",
	FleetRun:         "`sigctl fleet --out bench/fleet-run.json` with a reduced fleet (`make bench` runs it)",
	FleetFullDefault: "`FLEET_FULL_DEFAULT=1 bash bench/fleet-run.sh` (the full fleet at the default block size, 127,469 rows)",
	TrainerFleet:     "`bash bench/trainer.sh` (`trainer fleet --seeds 8 --measured bench/preemption.json --report bench/fleet.json`)",
	Preemption:       "`bash bench/trainer.sh` (BenchmarkPreemptionCommits with SIG_BENCH_PREEMPTION_JSON)",
	Scale:            "`bash bench/scale.sh` (the control plane's scale curve, sigd/scale)",
	Embeddings:       "`bash bench/embeddings.sh` (`trainer embeddings-report --json bench/embeddings.json`)",
}

// Inputs are the file names a bench directory may hold, in report order.
var Inputs = []string{FleetFull, FleetFullDefault, FleetRun, Scale, TrainerFleet, Preemption, Embeddings}

// Makes returns the command that writes the input file name.
func Makes(name string) string { return makes[name] }

// HasInputs says whether dir holds any of the report's inputs.
func HasInputs(dir string) bool {
	for _, name := range Inputs {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// readJSON decodes dir/name into v. It returns false, nil when the file
// does not exist; an error names the file and, for a value of the wrong
// type, the field.
func readJSON(dir, name string, v any) (bool, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, decode(path, b, v)
}

func decode(path string, b []byte, v any) error {
	err := json.NewDecoder(bytes.NewReader(b)).Decode(v)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return fmt.Errorf("%s: field %s: a JSON %s where %s was expected", path, te.Field, te.Value, te.Type)
	case errors.As(err, &se):
		return fmt.Errorf("%s: not JSON (at byte %d): %v", path, se.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("%s: not JSON: it ends before its value does (%d bytes)", path, len(b))
	}
	return fmt.Errorf("%s: %w", path, err)
}

// malformed is an input that decoded but lacks what the report needs.
func malformed(dir, name, field, what string) error {
	return fmt.Errorf("%s: field %s: %s", filepath.Join(dir, name), field, what)
}

// checkFigures holds a file's figures to internal/figure's rules.
func checkFigures(dir, name string, s figure.Set) error {
	if len(s) == 0 {
		return malformed(dir, name, "figures", "missing or empty")
	}
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if err := s[k].Check(); err != nil {
			return malformed(dir, name, "figures."+k, err.Error())
		}
	}
	return nil
}

// readFleetResults reads a fleet run's results (fleet/results).
func readFleetResults(dir, name string) (*results.Results, bool, error) {
	var r results.Results
	ok, err := readJSON(dir, name, &r)
	if !ok || err != nil {
		return nil, ok, err
	}
	switch {
	case r.Schema != results.SchemaVersion:
		return nil, true, malformed(dir, name, "schema", fmt.Sprintf("%q, this build reads %q", r.Schema, results.SchemaVersion))
	case len(r.Epochs) == 0:
		return nil, true, malformed(dir, name, "epochs", "missing or empty")
	}
	return &r, true, nil
}

// ScaleSchema is the version of bench/scale.json this build reads.
const ScaleSchema = "sig.scale/v1"

// scaleFile is bench/scale.json (sigd/scale): the fields the report plots.
type scaleFile struct {
	Schema  string       `json:"schema"`
	Machine string       `json:"machine"`
	Points  []scalePoint `json:"points"`
	Notes   []string     `json:"notes"`
}

type scalePoint struct {
	Components   *int     `json:"components"`
	SubmitP50Ms  *float64 `json:"submit_p50_ms"`
	SubmitP99Ms  *float64 `json:"submit_p99_ms"`
	Submits      int      `json:"submits"`
	QueueOpsPerS float64  `json:"queue_ops_per_s"`
	PebbleBytes  int64    `json:"pebble_bytes"`
	SigdRSSBytes int64    `json:"sigd_rss_bytes"`
	EvictPerS    float64  `json:"evict_per_s"`
}

func readScale(dir string) (*scaleFile, bool, error) {
	var s scaleFile
	ok, err := readJSON(dir, Scale, &s)
	if !ok || err != nil {
		return nil, ok, err
	}
	if s.Schema != ScaleSchema {
		return nil, true, malformed(dir, Scale, "schema", fmt.Sprintf("%q, this build reads %q", s.Schema, ScaleSchema))
	}
	if len(s.Points) == 0 {
		return nil, true, malformed(dir, Scale, "points", "missing or empty")
	}
	for i, p := range s.Points {
		switch {
		case p.Components == nil:
			return nil, true, malformed(dir, Scale, fmt.Sprintf("points[%d].components", i), "missing")
		case p.SubmitP50Ms == nil || p.SubmitP99Ms == nil:
			return nil, true, malformed(dir, Scale, fmt.Sprintf("points[%d].submit_p50_ms, submit_p99_ms", i), "missing")
		}
	}
	return &s, true, nil
}

// trainerFleet is bench/fleet.json (`trainer fleet --report`): the fields
// the report shows.
type trainerFleet struct {
	Runs []struct {
		Seed               uint64 `json:"seed"`
		Jobs               int    `json:"jobs"`
		PreemptedEpochs    int    `json:"preempted_epochs"`
		PreemptedCommitted int    `json:"preempted_committed"`
		TableII            struct {
			Training, Queued, OnHold             float64
			QueuedPerTraining, OnHoldPerTraining float64
		} `json:"table_ii"`
		Goodput    goodputSummary `json:"goodput"`
		JobGoodput []struct {
			Job string  `json:"job"`
			MPG float64 `json:"mpg"`
		} `json:"job_goodput"`
	} `json:"runs"`
	Figures figure.Set `json:"figures"`
}

type goodputSummary struct {
	SG  float64 `json:"scheduling_goodput"`
	RG  float64 `json:"runtime_goodput"`
	PG  float64 `json:"program_goodput"`
	MPG float64 `json:"mpg"`
}

func readTrainerFleet(dir, name string) (*trainerFleet, bool, error) {
	var f trainerFleet
	ok, err := readJSON(dir, name, &f)
	if !ok || err != nil {
		return nil, ok, err
	}
	if len(f.Runs) == 0 {
		return nil, true, malformed(dir, name, "runs", "missing or empty")
	}
	return &f, true, checkFigures(dir, name, f.Figures)
}

// preemptionFile is bench/preemption.json (trainer's
// BenchmarkPreemptionCommits).
type preemptionFile struct {
	Figures          figure.Set `json:"figures"`
	DrainSaveSeconds []float64  `json:"drain_save_seconds"`
	ExitSeconds      []float64  `json:"exit_seconds"`
}

func readPreemption(dir string) (*preemptionFile, bool, error) {
	var p preemptionFile
	ok, err := readJSON(dir, Preemption, &p)
	if !ok || err != nil {
		return nil, ok, err
	}
	return &p, true, checkFigures(dir, Preemption, p.Figures)
}

// embeddingsFile is bench/embeddings.json (trainer embeddings-report).
type embeddingsFile struct {
	Figures figure.Set `json:"figures"`
}

func readEmbeddings(dir string) (*embeddingsFile, bool, error) {
	var e embeddingsFile
	ok, err := readJSON(dir, Embeddings, &e)
	if !ok || err != nil {
		return nil, ok, err
	}
	return &e, true, checkFigures(dir, Embeddings, e.Figures)
}
