package snapshot

import (
	"fmt"
	"slices"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/model"
)

// Snapshot is a model at a fingerprint.
//
// Invariant: Version is either the snapshot's own fresh version
// (FreshVersion) or, when the change categorisation allowed reuse, the
// version of the snapshot it replaced. Snapshots that share a version share
// one physical table and one interval record.
type Snapshot struct {
	Name        string       `json:"name"`
	Fingerprint Fingerprint  `json:"fingerprint"`
	Version     string       `json:"version"`
	Parents     []string     `json:"parents"` // parent model names, sorted
	Model       *model.Model `json:"model"`
	// Canonical is the canonical query text the data hash was taken over.
	Canonical string `json:"canonical,omitempty"`
	// SeedHash is the hash of a SEED model's CSV content.
	SeedHash string `json:"seed_hash,omitempty"`
	// Refs is every place Model.Query names a table, in offset order, as
	// DuckDB's parser found them when the project was loaded (offsets into
	// Model.Query): what pointing the query at physical tables needs, so
	// that executing a snapshot parses nothing. It is derived from
	// Model.Query and never hashed; nil (a snapshot saved before it
	// existed) means "parse the query". Whoever uses it checks each
	// reference against the text (sqlparse.RewriteTables), so a wrong one
	// fails rather than runs.
	Refs []TableRef `json:"refs,omitempty"`
}

// TableRef is one place a query names a table: its parts, lower-cased,
// and the byte offset of the name in the query (-1 when unknown).
type TableRef struct {
	Catalog string `json:"catalog,omitempty"`
	Schema  string `json:"schema,omitempty"`
	Name    string `json:"name"`
	Offset  int    `json:"offset"`
}

// ID identifies the snapshot: its name at its fingerprint.
func (s *Snapshot) ID() string { return s.Name + "@" + s.Fingerprint.String() }

// FreshVersion is the version the snapshot gets when nothing is reused: a
// hash of its own data and its parents' data. Equal data upstream and here
// therefore always lands on the same physical table, including after a
// revert.
func (s *Snapshot) FreshVersion() string {
	return hashOf([2]string{s.Fingerprint.DataHash, s.Fingerprint.ParentDataHash})
}

// PhysicalSchema is the schema holding the model's physical tables:
// gapless__<schema>, through FitIdent (shortened with a hash past
// MaxIdentBytes).
func (s *Snapshot) PhysicalSchema() string { return FitIdent("gapless__" + s.Model.Schema()) }

// PhysicalTable is the table name (inside PhysicalSchema) of this version:
// <schema>__<table>__<version>, through FitIdent (shortened with a hash past
// MaxIdentBytes).
func (s *Snapshot) PhysicalTable() string {
	return FitIdent(s.Model.Schema() + "__" + s.Model.Table() + "__" + s.Version)
}

// BuildAll computes a snapshot for every node of g, in topological order,
// from inputs keyed by model name. Each snapshot's parent hashes combine the
// parents' snapshots, so a change upstream changes every fingerprint below
// it. Versions are fresh; apply Categorize and AssignVersions to reuse
// versions of a previous state.
func BuildAll(g *dag.Graph, inputs map[string]Input) (map[string]*Snapshot, error) {
	out := make(map[string]*Snapshot, len(inputs))
	for _, name := range g.Order() {
		in, ok := inputs[name]
		if !ok || in.Model == nil {
			return nil, fmt.Errorf("snapshot: no model for graph node %s", name)
		}
		parents := g.Parents(name)
		pd := make([][3]string, 0, len(parents))
		pm := make([][3]string, 0, len(parents))
		for _, p := range parents {
			ps := out[p] // present: parents precede children in Order
			pd = append(pd, [3]string{p, ps.Fingerprint.DataHash, ps.Fingerprint.ParentDataHash})
			pm = append(pm, [3]string{p, ps.Fingerprint.MetadataHash, ps.Fingerprint.ParentMetadataHash})
		}
		s := &Snapshot{
			Name: name,
			Fingerprint: Fingerprint{
				DataHash:           dataHash(in),
				MetadataHash:       metadataHash(in.Model),
				ParentDataHash:     hashOf(pd),
				ParentMetadataHash: hashOf(pm),
			},
			Parents:   slices.Clone(parents),
			Model:     in.Model,
			Canonical: in.Canonical,
			SeedHash:  in.SeedHash,
			Refs:      in.Refs,
		}
		s.Version = s.FreshVersion()
		out[name] = s
	}
	return out, nil
}
