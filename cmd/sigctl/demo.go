package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sigdata/sig/examples"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/transform"
)

func init() {
	register(&command{name: "demo", usage: "[--fleet DIR]: the main job end to end on embedded defaults", run: runDemo})
}

// fleetModel is one model of the demo fleet.
type fleetModel struct {
	name  string
	src   []byte
	canon *matching.Canonical
}

// loadFleet reads *.sig graphs from dir, or the embedded fleet when dir is
// empty.
func loadFleet(dir string, s *transform.Schema) ([]fleetModel, error) {
	var fsys fs.FS = examples.Fleet
	root := "fleet"
	if dir != "" {
		fsys, root = os.DirFS(dir), "."
	}
	names, err := fs.Glob(fsys, path.Join(root, "*.sig"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no *.sig graphs in %s", dir)
	}
	sort.Strings(names)
	var models []fleetModel
	for _, n := range names {
		src, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		g, _, err := transform.ParseAndCheck(src, n, s, transform.Default(), transform.Limits{})
		if err != nil {
			return nil, err
		}
		c, err := matching.Canonicalize(g, s, transform.Default(), transform.Limits{})
		if err != nil {
			return nil, err
		}
		models = append(models, fleetModel{name: strings.TrimSuffix(path.Base(n), ".sig"), src: src, canon: c})
	}
	return models, nil
}

// printSharing prints which components the models of a fleet share.
func printSharing(w io.Writer, models []fleetModel) {
	type use struct {
		nodes int
		users []string
		dsl   string
	}
	uses := map[matching.Key]*use{}
	var order []matching.Key
	inputs := 0
	for _, m := range models {
		for i := range m.canon.Components {
			comp := &m.canon.Components[i]
			inputs++
			u, ok := uses[comp.Key]
			if !ok {
				u = &use{nodes: len(comp.Nodes), dsl: m.canon.DSL(comp, "x")}
				uses[comp.Key] = u
				order = append(order, comp.Key)
			}
			u.users = append(u.users, m.name+"."+comp.Input)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return len(uses[order[i]].users) > len(uses[order[j]].users) })
	fmt.Fprintf(w, "Fleet: %d models, %d model inputs, %d distinct components\n\n", len(models), inputs, len(uses))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tNODES\tUSED BY")
	shared := 0
	for _, k := range order {
		u := uses[k]
		if len(u.users) > 1 {
			shared++
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", k.Short(), u.nodes, strings.Join(u.users, ", "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d components are shared. Per raw block, local input generation computes %d components; SIG computes %d (%.2fx less).\n",
		shared, inputs, len(uses), float64(inputs)/float64(len(uses)))
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	dir := fs.String("fleet", "", "directory of *.sig model graphs (default: the embedded examples/fleet)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	s := transform.AdsSchema()
	models, err := loadFleet(*dir, s)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "== 1. Canonicalize the fleet's transformation graphs and match their components")
	printSharing(stdout, models)
	return nil
}
