package main

import (
	"crypto/tls"
	"fmt"

	"github.com/sigdata/sig/internal/cli"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/reader"
)

// unitMode is a --mode flag (memo, local or ready-else-local) as the
// units' Mode: what sigctl read and sigctl export share.
func unitMode(m string) (func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode, error) {
	switch m {
	case "memo":
		return nil, nil
	case "local":
		return func(*sigv1.InputSolution, *sigv1.BlockRead) readerv1.InputMode {
			return readerv1.InputMode_INPUT_MODE_LOCAL
		}, nil
	case "ready-else-local":
		return reader.ModeReadyElseLocal, nil
	}
	return nil, fmt.Errorf("%w: --mode %q (want memo, local or ready-else-local)", cli.ErrUsage, m)
}

// pipelineUnits resolves a pipeline's read solution at sigd (over rng, or
// the range of its last submit when rng is empty) and cuts it into work
// units, as a trainer does.
func pipelineUnits(s *session, client, pipeline, rng, mode string, batchRows int) ([]*readerv1.WorkUnit, error) {
	modeOf, err := unitMode(mode)
	if err != nil {
		return nil, err
	}
	req := &sigv1.GetReadSolutionRequest{Client: client, Pipeline: pipeline}
	if rng != "" {
		if req.Range, err = parseRange(rng); err != nil {
			return nil, err
		}
	}
	sol, err := call(s, sigv1.SIGClient.GetReadSolution, req)
	if err != nil {
		return nil, err
	}
	return reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: batchRows, Mode: modeOf})
}

// readerClient dials the readers at addrs with the session's token (and
// TLS when the session uses it: --tls covers the readers too).
func readerClient(s *session, addrs []string) (*reader.Client, error) {
	cfg := reader.ClientConfig{Addresses: addrs, Token: s.conn.Token}
	if s.conn.TLS {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return reader.NewClient(cfg)
}
