package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sigdata/sig/internal/cli"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// sigctl search    [--subgraph DSL] [--column C] [--op O] [--client C] [--pipeline P] [--prefix HEX] [--all]
// sigctl component KEY
// sigctl evict     (--subgraph DSL | --node-key KEY) (--dry-run | --reason TEXT)
// sigctl audit     [--limit N]
// sigctl evict-block KEY BLOCK --reason TEXT [--recompute]
//
// Subgraph eviction (Ads paper IV.A, "Eviction"): find the components that
// contain a faulty subgraph, see what evicting them would remove (dry run),
// evict with a reason that goes into the audit log. Evicting and the audit
// log need the operator role; clients search their own pipelines'
// components. One memoized block (a corrupt object, a suspect run) is
// evicted or recomputed alone with evict-block.
func init() {
	registerRemote(remote{name: "search", flags: searchFlags, json: "print the responses as JSON",
		usage: "[--subgraph DSL] [--column C] [--op O] [--client C] [--pipeline P] [--prefix HEX] [--all] [--json]: find components"})
	registerRemote(remote{name: "component", flags: componentFlags, json: "print the response as JSON",
		usage: "KEY [--json]: one component: its graph, pipelines, memo blocks and related components"})
	registerRemote(remote{name: "evict", flags: evictFlags, json: "print the response as JSON",
		usage: "(--subgraph DSL | --node-key KEY) (--dry-run | --reason TEXT) [--json]: evict a faulty subgraph's memoized data (operator)"})
	registerRemote(remote{name: "audit", flags: auditFlags, json: "print the response as JSON",
		usage: "[--limit N] [--json]: the eviction audit log, newest first (operator)"})
	registerRemote(remote{name: "evict-block", flags: evictBlockFlags, json: "print the response as JSON",
		usage: "KEY BLOCK --reason TEXT [--recompute] [--json]: evict one memoized block, or recompute it now (operator)"})
}

func shortKey(key string) string { return key[:min(12, len(key))] }

func searchFlags(fs *flag.FlagSet) func(*session, []string) error {
	req := &sigv1.SearchComponentsRequest{}
	fs.StringVar(&req.SubgraphDsl, "subgraph", "", `components containing this DSL expression, e.g. 'unigrams(lower(col("query")))'`)
	fs.StringVar(&req.RawSource, "source", "", "raw source of --subgraph (default ads)")
	fs.StringVar(&req.Column, "column", "", "components reading this raw column")
	fs.StringVar(&req.Op, "op", "", "components using this op")
	fs.StringVar(&req.Client, "client", "", "components used by this client's pipelines")
	fs.StringVar(&req.Pipeline, "pipeline", "", "components used by this pipeline")
	fs.StringVar(&req.KeyPrefix, "prefix", "", "components whose key starts with these hex digits")
	limit := fs.Uint("limit", 100, "results per page (at most 10000)")
	fs.StringVar(&req.PageToken, "after", "", "continue after this page token")
	all := fs.Bool("all", false, "follow every page")
	return func(s *session, pos []string) error {
		if len(pos) > 0 {
			return fmt.Errorf("%w: unexpected argument %q (give the subgraph with --subgraph)", cli.ErrUsage, pos[0])
		}
		req.Limit = uint32(*limit)
		var tw *tabwriter.Writer
		if !s.json {
			tw = table(s.stdout, "COMPONENT\tREADY\tPENDING\tFAILED\tBYTES\tPIPELINES\tDSL")
		}
		n := 0
		for {
			resp, err := call(s, sigv1.SIGClient.SearchComponents, req)
			if err != nil {
				return err
			}
			if s.json {
				if err := printJSON(s.stdout, resp); err != nil {
					return err
				}
			} else {
				for _, cs := range resp.Components {
					dsl := strings.TrimPrefix(strings.TrimSpace(cs.CanonicalDsl), "input out = ")
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", shortKey(cs.Key), cs.BlocksReady, cs.BlocksPending, cs.BlocksFailed,
						cs.Bytes, strings.Join(cs.Pipelines, ","), strings.ReplaceAll(dsl, "\n", " "))
				}
			}
			n += len(resp.Components)
			if resp.NextPageToken == "" || !*all {
				if tw != nil {
					tw.Flush()
					fmt.Fprintf(s.stdout, "%d components", n)
					if resp.NextPageToken != "" {
						fmt.Fprintf(s.stdout, "; more with --after %s (or --all)", resp.NextPageToken)
					}
					fmt.Fprintln(s.stdout)
				}
				return nil
			}
			req.PageToken = resp.NextPageToken
		}
	}
}

func componentFlags(*flag.FlagSet) func(*session, []string) error {
	return func(s *session, pos []string) error {
		if len(pos) != 1 {
			return fmt.Errorf("%w: component KEY", cli.ErrUsage)
		}
		resp, err := call(s, sigv1.SIGClient.GetComponent, &sigv1.GetComponentRequest{Key: pos[0]})
		if err != nil {
			return err
		}
		return s.print(resp, func(w io.Writer) error {
			cs := resp.Component
			fmt.Fprintf(w, "component %s (%s, %d nodes) over %s: %s\n", cs.Key, cs.Type, cs.Nodes, cs.RawSource, strings.Join(cs.Columns, ", "))
			fmt.Fprintf(w, "ops: %s\n", strings.Join(cs.Ops, ", "))
			fmt.Fprintf(w, "pipelines: %s\n", strings.Join(cs.Pipelines, ", "))
			if t := cs.LastRequested; t != nil {
				fmt.Fprintf(w, "last requested: %s\n", t.AsTime().UTC().Format(time.RFC3339))
			}
			fmt.Fprintf(w, "blocks: %d ready, %d pending, %d failed, %d bytes\n", cs.BlocksReady, cs.BlocksPending, cs.BlocksFailed, cs.Bytes)
			fmt.Fprintf(w, "contained by: %d components; contains: %d\n", len(resp.ContainedBy), len(resp.Contains))
			fmt.Fprintln(w, strings.TrimSpace(cs.CanonicalDsl))
			tw := table(w, "BLOCK\tSTATE\tROWS\tBYTES\tREASON")
			for _, b := range resp.Blocks {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", b.BlockId, strings.TrimPrefix(b.State.String(), "BLOCK_STATE_"), b.Rows, b.Bytes, b.Reason)
			}
			return tw.Flush()
		})
	}
}

func evictFlags(fs *flag.FlagSet) func(*session, []string) error {
	subgraph := fs.String("subgraph", "", `the faulty subgraph as a DSL expression: everything containing it is evicted`)
	nodeKey := fs.String("node-key", "", "or: evict everything containing the node (component) with this key")
	source := fs.String("source", "", "raw source of --subgraph (default ads)")
	dryRun := fs.Bool("dry-run", false, "list what would be evicted and change nothing")
	reason := fs.String("reason", "", "why (required to evict; recorded in the audit log)")
	return func(s *session, pos []string) error {
		switch {
		case len(pos) > 0:
			return fmt.Errorf("%w: unexpected argument %q (give the target with --subgraph or --node-key)", cli.ErrUsage, pos[0])
		case (*subgraph == "") == (*nodeKey == ""):
			return fmt.Errorf("%w: give one of --subgraph and --node-key", cli.ErrUsage)
		case *dryRun && *reason != "":
			return fmt.Errorf("%w: a dry run takes no --reason", cli.ErrUsage)
		case !*dryRun && strings.TrimSpace(*reason) == "":
			return fmt.Errorf("%w: evicting needs --reason (it goes into the audit log); see the impact first with --dry-run", cli.ErrUsage)
		}
		req := &sigv1.EvictRequest{RawSource: *source, DryRun: *dryRun, Reason: *reason}
		if *subgraph != "" {
			req.Target = &sigv1.EvictRequest_SubgraphDsl{SubgraphDsl: *subgraph}
		} else {
			req.Target = &sigv1.EvictRequest_NodeKey{NodeKey: *nodeKey}
		}
		// A real eviction deletes many objects: give it longer than a lookup.
		if !*dryRun {
			s.timeout = max(s.timeout, 10*time.Minute)
		}
		resp, err := call(s, sigv1.SIGClient.Evict, req)
		if err != nil {
			return err
		}
		return s.print(resp, func(w io.Writer) error {
			if resp.DryRun {
				fmt.Fprintf(w, "dry run: would evict %d memo blocks (%d bytes) of %d components used by %d pipelines\n",
					resp.Blocks, resp.Bytes, len(resp.Components), len(resp.Pipelines))
			} else {
				fmt.Fprintf(w, "evicted %d memo blocks (%d bytes, %d objects deleted) of %d components used by %d pipelines; audit entry %s\n",
					resp.Blocks, resp.Bytes, resp.ObjectsDeleted, len(resp.Components), len(resp.Pipelines), resp.AuditId)
			}
			for _, k := range resp.Components {
				fmt.Fprintf(w, "component %s\n", k)
			}
			printPipelines(w, resp.Pipelines)
			if !resp.DryRun && len(resp.Pipelines) > 0 {
				fmt.Fprintln(w, "their read solutions are pending; the data is recomputed when the pipelines read again")
			}
			return nil
		})
	}
}

func printPipelines(w io.Writer, pipelines []string) {
	for _, p := range pipelines {
		fmt.Fprintf(w, "pipeline  %s\n", p)
	}
}

func evictBlockFlags(fs *flag.FlagSet) func(*session, []string) error {
	reason := fs.String("reason", "", "why (required; recorded in the audit log)")
	recompute := fs.Bool("recompute", false, "make the block pending and recompute it now, rather than when a pipeline next reads it")
	return func(s *session, pos []string) error {
		switch {
		case len(pos) != 2:
			return fmt.Errorf("%w: evict-block KEY BLOCK (the component key and the block id, as sigctl component lists them)", cli.ErrUsage)
		case strings.TrimSpace(*reason) == "":
			return fmt.Errorf("%w: evict-block needs --reason (it goes into the audit log)", cli.ErrUsage)
		}
		resp, err := call(s, sigv1.SIGClient.EvictBlock, &sigv1.EvictBlockRequest{ComponentKey: pos[0], BlockId: pos[1],
			Reason: *reason, Recompute: *recompute})
		if err != nil {
			return err
		}
		return s.print(resp, func(w io.Writer) error {
			switch {
			case !*recompute:
				fmt.Fprintf(w, "evicted block %s of component %s (%d bytes, %d objects deleted); audit entry %s\n",
					resp.BlockId, resp.ComponentKey, resp.Bytes, resp.ObjectsDeleted, resp.AuditId)
				fmt.Fprintln(w, "it is recomputed when a pipeline next reads its solution")
			case resp.AuditId == "":
				fmt.Fprintf(w, "block %s of component %s is already pending; scheduled again\n", resp.BlockId, resp.ComponentKey)
			default:
				fmt.Fprintf(w, "recomputing block %s of component %s (%d bytes, %d objects deleted); audit entry %s\n",
					resp.BlockId, resp.ComponentKey, resp.Bytes, resp.ObjectsDeleted, resp.AuditId)
			}
			printPipelines(w, resp.Pipelines)
			return nil
		})
	}
}

func auditFlags(fs *flag.FlagSet) func(*session, []string) error {
	limit := fs.Uint("limit", 100, "entries (at most 1000)")
	return func(s *session, pos []string) error {
		if len(pos) > 0 {
			return fmt.Errorf("%w: unexpected argument %q", cli.ErrUsage, pos[0])
		}
		resp, err := call(s, sigv1.SIGClient.ListAudit, &sigv1.ListAuditRequest{Limit: uint32(*limit)})
		if err != nil {
			return err
		}
		return s.print(resp, func(w io.Writer) error {
			tw := table(w, "WHEN\tWHO\tCOMPONENTS\tBLOCKS\tBYTES\tWHAT\tWHY")
			for _, e := range resp.Entries {
				when := ""
				if e.When != nil {
					when = e.When.AsTime().UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", when, e.Who, len(e.Components), e.Blocks, e.Bytes,
					singleLine(e.What), singleLine(e.Why))
			}
			return tw.Flush()
		})
	}
}

// singleLine keeps a free-text field on its table row.
func singleLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
