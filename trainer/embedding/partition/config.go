package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The JSON configuration read by `trainer partition --config FILE.json`.
// Unknown fields anywhere are errors, so a misspelled optional field is never
// silently ignored. Fields marked optional may be left out.
//
//	{
//	  "tables": [{
//	    "name": "query_ids",            // unique
//	    "vocab": 1000000,               // rows, > 0
//	    "dim": 64,                      // columns, > 0
//	    "bytes_per_element": 4,         // optional, default 4
//	    "optimizer": "adagrad",         // sgd, adagrad, adam, ftrl (element-wise);
//	                                    // rowwise_adagrad, lamb, sm3 (row-wise)
//	    "valency": 3.5,                 // mean feature values per example (> 0)
//	    "valency_dist": [{"valency": 1, "weight": 0.7}, {"valency": 10, "weight": 0.3}],
//	                                    // optional; if both are given they must agree
//	    "zipf_s": 1.05,                 // optional: Zipf access profile, row 0 hottest
//	    "row_freq": [0.5, 0.3, ...],    // optional: per-row relative frequency (len = vocab)
//	                                    // neither zipf_s nor row_freq: uniform access
//	    "measured": {                   // optional: profiled statistics (paper V.C, FDP)
//	      "mean_valency": 4.1,
//	      "valency_dist": [{"valency": 1, "weight": 0.7}, ...],
//	      "unique_per_batch": 20000,
//	      "row_freq": [...],            // len = vocab
//	      "hot_rows": [{"row": 17, "fraction": 0.02}, ...],
//	                                    // the hottest rows; the rest uniform, or
//	      "tail_zipf_s": 1.1,           // Zipf by row position (sorted vocabulary)
//	      "row_lookups": [...]          // per row: mean deduplicated lookups per batch
//	    }
//	  }],
//	  "topology": {
//	    "chips": 4,
//	    "sparsecores_per_chip": 4,
//	    "hbm_bytes_per_chip": 34359738368,
//	    "hbm_bytes_per_sec_per_chip": 1.2e12,   // optional, default 1.2e12
//	    "access_granularity_bytes": 64,         // optional, default 64
//	    "lookup_overhead_ns": 0.1,              // optional, default 0.1
//	    "shard_overhead_ns": 1000               // optional, default 1000
//	  },
//	  "batch_size": 8192
//	}

type tableJSON struct {
	Name            string        `json:"name"`
	Vocab           int64         `json:"vocab"`
	Dim             int           `json:"dim"`
	BytesPerElement *int          `json:"bytes_per_element"`
	Optimizer       string        `json:"optimizer"`
	Valency         float64       `json:"valency"`
	ValencyDist     []valencyJSON `json:"valency_dist"`
	ZipfS           *float64      `json:"zipf_s"`
	RowFreq         []float64     `json:"row_freq"`
	Measured        *measuredJSON `json:"measured"`
}

type valencyJSON struct {
	Valency int     `json:"valency"`
	Weight  float64 `json:"weight"`
}

type measuredJSON struct {
	MeanValency    float64       `json:"mean_valency"`
	ValencyDist    []valencyJSON `json:"valency_dist"`
	UniquePerBatch float64       `json:"unique_per_batch"`
	RowFreq        []float64     `json:"row_freq"`
	HotRows        []RowFraction `json:"hot_rows"`
	TailZipfS      float64       `json:"tail_zipf_s"`
	RowLookups     []float64     `json:"row_lookups"`
}

type topologyJSON struct {
	Chips              int      `json:"chips"`
	SparseCoresPerChip int      `json:"sparsecores_per_chip"`
	HBMBytesPerChip    int64    `json:"hbm_bytes_per_chip"`
	HBMBandwidth       *float64 `json:"hbm_bytes_per_sec_per_chip"`
	AccessGranularity  *int     `json:"access_granularity_bytes"`
	LookupOverheadNS   *float64 `json:"lookup_overhead_ns"`
	ShardOverheadNS    *float64 `json:"shard_overhead_ns"`
}

type configJSON struct {
	Tables    []json.RawMessage `json:"tables"`
	Topology  *json.RawMessage  `json:"topology"`
	BatchSize int               `json:"batch_size"`
}

// ReadConfig reads a JSON configuration from r; see ParseConfig.
func ReadConfig(r io.Reader) (*Problem, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("partition: reading config: %w", err)
	}
	return ParseConfig(data)
}

// ParseConfig parses and validates a JSON configuration (format above).
// Errors wrap ErrInvalidProblem, or ErrOutOfMemory for a table larger than
// all HBM, and name the table and field.
func ParseConfig(data []byte) (*Problem, error) {
	var c configJSON
	if err := decodeStrict(data, &c); err != nil {
		return nil, invalid("config: %v", err)
	}
	if c.Topology == nil {
		return nil, invalid("config: topology is required")
	}
	var tj topologyJSON
	if err := decodeStrict(*c.Topology, &tj); err != nil {
		return nil, invalid("topology: %v", err)
	}
	p := &Problem{BatchSize: c.BatchSize, Topology: Topology{
		Chips:              tj.Chips,
		SparseCoresPerChip: tj.SparseCoresPerChip,
		HBMBytesPerChip:    tj.HBMBytesPerChip,
		HBMBandwidth:       DefaultHBMBandwidth,
		AccessGranularity:  DefaultAccessGranularity,
		LookupOverheadNS:   DefaultLookupOverheadNS,
		ShardOverheadNS:    DefaultShardOverheadNS,
	}}
	if tj.HBMBandwidth != nil {
		if *tj.HBMBandwidth <= 0 {
			return nil, invalid("topology: hbm_bytes_per_sec_per_chip must be > 0, got %v", *tj.HBMBandwidth)
		}
		p.Topology.HBMBandwidth = *tj.HBMBandwidth
	}
	if tj.AccessGranularity != nil {
		if *tj.AccessGranularity <= 0 {
			return nil, invalid("topology: access_granularity_bytes must be > 0, got %d", *tj.AccessGranularity)
		}
		p.Topology.AccessGranularity = *tj.AccessGranularity
	}
	if tj.LookupOverheadNS != nil {
		p.Topology.LookupOverheadNS = *tj.LookupOverheadNS
	}
	if tj.ShardOverheadNS != nil {
		p.Topology.ShardOverheadNS = *tj.ShardOverheadNS
	}
	for i, raw := range c.Tables {
		tb, err := parseTable(raw)
		if err != nil {
			return nil, invalid("%s: %v", tableLabel(i, raw), err)
		}
		p.Tables = append(p.Tables, tb)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func parseTable(raw json.RawMessage) (Table, error) {
	var tj tableJSON
	if err := decodeStrict(raw, &tj); err != nil {
		return Table{}, err
	}
	tb := Table{
		Name:    tj.Name,
		Vocab:   tj.Vocab,
		Dim:     tj.Dim,
		Valency: Valency{Mean: tj.Valency},
		Access:  Access{RowFreq: tj.RowFreq},
	}
	if tj.BytesPerElement != nil {
		if *tj.BytesPerElement <= 0 {
			return Table{}, fmt.Errorf("bytes_per_element must be > 0, got %d", *tj.BytesPerElement)
		}
		tb.BytesPerElement = *tj.BytesPerElement
	}
	if tj.Optimizer == "" {
		return Table{}, fmt.Errorf("optimizer is required (one of %s)", strings.Join(OptimizerNames(), ", "))
	}
	opt, ok := OptimizerByName(tj.Optimizer)
	if !ok {
		return Table{}, fmt.Errorf("unknown optimizer %q (want one of %s)", tj.Optimizer, strings.Join(OptimizerNames(), ", "))
	}
	tb.Optimizer = opt
	if tj.ZipfS != nil {
		if *tj.ZipfS <= 0 {
			return Table{}, fmt.Errorf("zipf_s must be > 0, got %v (leave it out for uniform access)", *tj.ZipfS)
		}
		tb.Access.ZipfS = *tj.ZipfS
	}
	for _, v := range tj.ValencyDist {
		tb.Valency.Dist = append(tb.Valency.Dist, ValencyWeight(v))
	}
	if m := tj.Measured; m != nil {
		tb.Measured = &Measured{
			MeanValency:    m.MeanValency,
			UniquePerBatch: m.UniquePerBatch,
			RowFreq:        m.RowFreq,
			HotRows:        m.HotRows,
			TailZipfS:      m.TailZipfS,
			RowLookups:     m.RowLookups,
		}
		for _, v := range m.ValencyDist {
			tb.Measured.ValencyDist = append(tb.Measured.ValencyDist, ValencyWeight(v))
		}
	}
	return tb, nil
}

// tableLabel names a table in an error: by position, and by name if the
// raw JSON has a readable one.
func tableLabel(i int, raw json.RawMessage) string {
	var n struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &n) == nil && n.Name != "" {
		return fmt.Sprintf("table %q (tables[%d])", n.Name, i)
	}
	return fmt.Sprintf("tables[%d]", i)
}

// decodeStrict decodes exactly one JSON value, rejecting unknown fields and
// trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty input")
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("field %q: a JSON %s cannot be a %s", te.Field, te.Value, te.Type)
		}
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}
