package cli

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/project"
)

func newDagCmd(g *globals) *cobra.Command {
	var file string
	var selectors []string
	cmd := &cobra.Command{
		Use:   "dag [FILE]",
		Short: "Show the project's model DAG as text, or write it as an HTML page or a DOT file",
		Long: `Prints every model in dependency order (parents first) with its kind and
the models it reads, or writes the graph to FILE (the argument or --file):
a .html file is a self-contained page with the graph drawn in inline SVG
(no script, nothing fetched from the network); a .dot or .gv file is
Graphviz DOT (render it with: dot -Tsvg FILE).

--select keeps part of the graph, as SQLMesh's model selectors do: NAME
(a model, or a glob such as 'demo.*'), +NAME (with everything upstream of
it), NAME+ (with everything downstream), +NAME+ (both). Repeat it to keep
the union; only the edges between kept models are shown.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if file != "" && file != args[0] {
					return usagef("dag: give the output file once, as FILE or --file")
				}
				file = args[0]
			}
			write := writeDagText
			if file != "" {
				switch strings.ToLower(filepath.Ext(file)) {
				case ".html", ".htm":
					write = writeDagHTML
				case ".dot", ".gv":
					write = writeDagDOT
				default:
					return usagef("dag: %s: the file must end in .html (a page) or .dot (Graphviz)", file)
				}
			}
			pr, _, err := g.openProject(cmd.Context())
			if err != nil {
				return err
			}
			view, err := selectDag(pr, selectors)
			if err != nil {
				return err
			}
			if file == "" {
				return write(g.env.Stdout, view)
			}
			var buf bytes.Buffer
			if err := write(&buf, view); err != nil {
				return err
			}
			out, err := g.path(file)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return fmt.Errorf("dag: writing %s: %w", out, err)
			}
			fmt.Fprintf(g.env.Stdout, "Wrote the DAG of %s (%s) to %s\n",
				plural(int64(len(view.nodes)), "model", "models"), plural(int64(view.edgeCount()), "edge", "edges"), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "write the graph to this .html or .dot file instead of printing it")
	cmd.Flags().StringArrayVar(&selectors, "select", nil, "keep only these models: NAME or a glob, +NAME with its upstream, NAME+ with its downstream; repeatable")
	return cmd
}

// dagView is the part of a project's graph a dag command shows: nodes in
// topological order (parents first, ties by name), each with its kind and
// its parents among the nodes.
type dagView struct {
	nodes   []string
	kinds   map[string]string
	parents map[string][]string
}

func (v *dagView) edgeCount() int {
	n := 0
	for _, ps := range v.parents {
		n += len(ps)
	}
	return n
}

// selectDag keeps the models selectors name (every model when there is
// none). A selector that matches no model is an error naming it, with the
// closest model name.
func selectDag(pr *project.Project, selectors []string) (*dagView, error) {
	g := pr.Graph
	keep := map[string]bool{}
	if len(selectors) == 0 {
		for _, n := range g.Nodes() {
			keep[n] = true
		}
	}
	for _, sel := range selectors {
		pattern := strings.TrimSpace(sel)
		up := strings.HasPrefix(pattern, "+")
		down := strings.HasSuffix(pattern, "+")
		pattern = strings.TrimSuffix(strings.TrimPrefix(pattern, "+"), "+")
		if pattern == "" {
			return nil, usagef("--select %q: name a model", sel)
		}
		var matched []string
		for _, n := range g.Nodes() {
			ok, err := path.Match(pattern, n)
			if err != nil {
				return nil, usagef("--select %q: %w", sel, err)
			}
			if ok {
				matched = append(matched, n)
			}
		}
		if len(matched) == 0 {
			return nil, fmt.Errorf("--select %s: no model matches it in %s%s", sel, pr.Dir, didYouMean(pattern, modelNames(pr)))
		}
		for _, n := range matched {
			keep[n] = true
		}
		if up {
			for _, n := range g.Upstream(matched...) {
				keep[n] = true
			}
		}
		if down {
			for _, n := range g.Downstream(matched...) {
				keep[n] = true
			}
		}
	}
	v := &dagView{kinds: map[string]string{}, parents: map[string][]string{}}
	for _, n := range g.Order() {
		if !keep[n] {
			continue
		}
		v.nodes = append(v.nodes, n)
		kind := "?"
		if m := pr.Models[n]; m != nil {
			kind = string(m.Kind)
			if m.Source {
				kind = kindSource
			}
		}
		v.kinds[n] = kind
		for _, p := range g.Parents(n) {
			if keep[p] {
				v.parents[n] = append(v.parents[n], p)
			}
		}
	}
	return v, nil
}

// writeDagText prints one line per model, parents first, and under it one
// "<- parent" line per model it reads.
func writeDagText(w io.Writer, v *dagView) error {
	fmt.Fprintf(w, "%s, %s\n\n", plural(int64(len(v.nodes)), "model", "models"), plural(int64(v.edgeCount()), "edge", "edges"))
	for _, n := range v.nodes {
		fmt.Fprintf(w, "%s (%s)\n", n, v.kinds[n])
		for _, p := range v.parents[n] {
			fmt.Fprintf(w, "  <- %s\n", p)
		}
	}
	return nil
}

// dotQuote is a DOT double-quoted string.
func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// writeDagDOT writes the graph in Graphviz DOT: one node per model
// labelled with its kind, one edge parent -> child.
func writeDagDOT(w io.Writer, v *dagView) error {
	var b strings.Builder
	b.WriteString("digraph gapless {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n")
	for _, n := range v.nodes {
		fmt.Fprintf(&b, "  %s [label=%s];\n", dotQuote(n), dotQuote(n+"\n"+v.kinds[n]))
	}
	for _, n := range v.nodes {
		for _, p := range v.parents[n] {
			fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote(p), dotQuote(n))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("writing the DOT graph: %w", err)
	}
	return nil
}

// dagLayers assigns each node its layer: 0 for a node without parents,
// else one more than its deepest parent (nodes come parents first).
func dagLayers(v *dagView) (map[string]int, [][]string) {
	layer := map[string]int{}
	var layers [][]string
	for _, n := range v.nodes {
		l := 0
		for _, p := range v.parents[n] {
			l = max(l, layer[p]+1)
		}
		layer[n] = l
		for len(layers) <= l {
			layers = append(layers, nil)
		}
		layers[l] = append(layers[l], n)
	}
	return layer, layers
}

// writeDagHTML writes a self-contained page: the graph drawn in inline SVG
// (layers left to right, parents before children), then a table of every
// model with its kind and parents. It loads nothing: no script, no style
// sheet, no font from the network.
func writeDagHTML(w io.Writer, v *dagView) error {
	const (
		boxH   = 44
		colGap = 80
		rowGap = 20
		margin = 20
	)
	// Boxes fit the longest name (about 7 pixels a character at 12px).
	boxW := 160
	for _, n := range v.nodes {
		boxW = max(boxW, 7*len([]rune(n))+16)
	}
	layer, layers := dagLayers(v)
	pos := map[string][2]int{}
	rows := 0
	for i, names := range layers {
		for j, n := range names {
			pos[n] = [2]int{margin + i*(boxW+colGap), margin + j*(boxH+rowGap)}
		}
		rows = max(rows, len(names))
	}
	width := margin*2 + max(len(layers), 1)*(boxW+colGap) - colGap
	height := margin*2 + max(rows, 1)*(boxH+rowGap) - rowGap
	e := html.EscapeString
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>gapless DAG</title>\n<style>\n")
	b.WriteString("body{font-family:sans-serif;margin:1em}svg text{font-size:12px}.box{fill:#eef4fb;stroke:#3b6ea5}" +
		".kind{fill:#555;font-size:10px}.edge{stroke:#888;fill:none;marker-end:url(#arrow)}table{border-collapse:collapse;margin-top:1em}" +
		"td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}\n</style>\n</head>\n<body>\n")
	fmt.Fprintf(&b, "<h1>gapless DAG</h1>\n<p>%s, %s</p>\n", e(plural(int64(len(v.nodes)), "model", "models")), e(plural(int64(v.edgeCount()), "edge", "edges")))
	fmt.Fprintf(&b, "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"model dependency graph\">\n", width, height, width, height)
	b.WriteString("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" orient=\"auto\">" +
		"<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#888\"/></marker></defs>\n")
	for _, n := range v.nodes {
		for _, p := range v.parents[n] {
			from, to := pos[p], pos[n]
			x1, y1 := from[0]+boxW, from[1]+boxH/2
			x2, y2 := to[0], to[1]+boxH/2
			mid := (x1 + x2) / 2
			c1, c2 := [2]int{mid, y1}, [2]int{mid, y2}
			if layer[n]-layer[p] > 1 {
				// An edge past a layer arcs over the boxes between.
				top := min(y1, y2) - boxH/2 - rowGap
				c1, c2 = [2]int{x1 + (x2-x1)/4, top}, [2]int{x2 - (x2-x1)/4, top}
			}
			fmt.Fprintf(&b, "<path class=\"edge\" d=\"M%d,%d C%d,%d %d,%d %d,%d\"><title>%s -&gt; %s</title></path>\n",
				x1, y1, c1[0], c1[1], c2[0], c2[1], x2, y2, e(p), e(n))
		}
	}
	for _, n := range v.nodes {
		p := pos[n]
		fmt.Fprintf(&b, "<g><title>%s</title><rect class=\"box\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\"/>"+
			"<text x=\"%d\" y=\"%d\">%s</text><text class=\"kind\" x=\"%d\" y=\"%d\">%s</text></g>\n",
			e(n), p[0], p[1], boxW, boxH, p[0]+8, p[1]+18, e(n), p[0]+8, p[1]+34, e(v.kinds[n]))
	}
	b.WriteString("</svg>\n<table>\n<tr><th>model</th><th>kind</th><th>reads</th></tr>\n")
	for _, n := range v.nodes {
		ps := slices.Clone(v.parents[n])
		for i := range ps {
			ps[i] = e(ps[i])
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", e(n), e(v.kinds[n]), strings.Join(ps, ", "))
	}
	b.WriteString("</table>\n</body>\n</html>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the HTML page: %w", err)
	}
	return nil
}
